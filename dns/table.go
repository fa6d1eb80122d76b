package dns

import (
	"encoding/binary"
	"net/netip"
	"sort"
	"strings"

	"github.com/wingman-mesh/wingman/internal/ndspb"
)

// registryKubernetes is the NameInfo.registry of Kubernetes services.
const registryKubernetes = "Kubernetes"

// entry is what one name answers. Immutable once its table is published.
type entry struct {
	// a and aaaa hold the address records without their owner name, back to back:
	// TYPE CLASS TTL RDLENGTH RDATA, 14 bytes per A and 26 per AAAA. The owner is written at
	// answer time as a compression pointer, so one entry serves every name of a host.
	a, aaaa []byte
	// target is set on search-domain shortcut names ("h.<search>."): the answer is a CNAME to
	// the query name without the search domain, followed by target's address records.
	target *entry
}

const (
	aTail    = 14
	aaaaTail = 26
)

// records returns the encoded records of qtype and the size of one record.
func (e *entry) records(qtype uint16) ([]byte, int) {
	if qtype == typeAAAA {
		return e.aaaa, aaaaTail
	}
	return e.a, aTail
}

// table is one built NameTable. Immutable once published through Server.table.
type table struct {
	names map[string]*entry // lower-cased FQDN with trailing dot
	// searchWire is the wire length (root byte included) of the search domain that shortcut
	// names end in; 0 when resolv.conf has no search domain.
	searchWire int
	wildcards  bool // some name starts with "*.": misses probe for wildcards
	src        *ndspb.NameTable
	byHost     map[string]*entry // NameTable host -> its entry, for /debug/ndsz
	skipped    int               // NameTable entries skipped (bad name or no usable address)
}

// lookup returns the entry for a lower-cased name: the exact name, else the nearest
// wildcard ("*.b.c." for "a.b.c."). wild is scratch of cap >= 258. It allocates nothing.
func (t *table) lookup(key, wild []byte) *entry {
	if e := t.names[string(key)]; e != nil {
		return e
	}
	if !t.wildcards {
		return nil
	}
	for i := 0; i < len(key)-1; i++ {
		if key[i] != '.' {
			continue
		}
		wild = append(append(wild[:0], '*', '.'), key[i+1:]...)
		if e := t.names[string(wild)]; e != nil {
			return e
		}
	}
	return nil
}

// naming is how NameTable hosts become names: Istio's alt-host rules. Immutable.
type naming struct {
	namespace string
	domain    string // proxy domain without the namespace label, e.g. "svc.cluster.local"
	domainL1  string // its first label, e.g. "svc"
	search    string // first search domain, lower-cased with trailing dot; "" for none
}

func newNaming(namespace, domain string, search []string) naming {
	n := naming{namespace: strings.ToLower(namespace)}
	domain = strings.Trim(strings.ToLower(domain), ".")
	if domain != "" {
		parts := strings.Split(domain, ".")
		if parts[0] == n.namespace && len(parts) > 1 {
			parts = parts[1:]
		}
		n.domain = strings.Join(parts, ".")
		n.domainL1 = parts[0]
	}
	if len(search) > 0 {
		if s := normalizeName(search[0]); s != "." && validName(s) {
			n.search = s
		}
	}
	return n
}

// normalizeName lower-cases h and gives it exactly one trailing dot.
func normalizeName(h string) string {
	return strings.ToLower(strings.TrimSuffix(h, ".")) + "."
}

// validName reports whether a normalized name can be a table key: labels of 1-63 bytes of
// printable ASCII other than '.' and '\\', at most 255 bytes in wire form.
func validName(n string) bool {
	if n == "." || len(n)+1 > maxNameWire {
		return false
	}
	label := 0
	for i := 0; i < len(n); i++ {
		c := n[i]
		switch {
		case c == '.':
			if label == 0 || label > 63 {
				return false
			}
			label = 0
		case c <= ' ' || c > '~' || c == '\\':
			return false
		default:
			label++
		}
	}
	return label == 0
}

// altNames returns the normalized names a NameTable host answers to, by the rules of Istio's
// GenerateAltHosts (pkg/dns/util.go) and BuildAlternateHosts (pkg/dns/client/dns.go): the host
// itself and, for Kubernetes services whose host ends in the proxy's domain, "short.ns.",
// "short." (own namespace only), "short.ns.<first domain label>." and the entry's alt_hosts.
// As in Istio, the domain test is a plain suffix test, and a Kubernetes host written with a
// trailing dot yields no name at all.
func (n naming) altNames(host string, ni *ndspb.NameTable_NameInfo) []string {
	if ni.GetRegistry() != registryKubernetes {
		return []string{normalizeName(host)}
	}
	if strings.HasSuffix(host, ".") {
		return nil
	}
	out := []string{normalizeName(host)}
	if n.domain == "" || !strings.HasSuffix(strings.ToLower(host), n.domain) {
		return out
	}
	short, ns := strings.ToLower(ni.GetShortname()), strings.ToLower(ni.GetNamespace())
	if short != "" && ns != "" {
		out = append(out, short+"."+ns+".")
		if ns == n.namespace {
			out = append(out, short+".")
		}
		out = append(out, short+"."+ns+"."+n.domainL1+".")
	}
	for _, alt := range ni.GetAltHosts() {
		out = append(out, normalizeName(alt))
	}
	return out
}

// candidate is one host's claim on a name while building.
type candidate struct {
	e     *entry
	host  string
	exact bool // the name is the host itself, not a generated form
	kube  bool
}

// beats decides conflicts deterministically: a host's own name beats a generated one, then
// Kubernetes beats other registries, then the smaller host name wins.
func (c candidate) beats(o candidate) bool {
	if c.exact != o.exact {
		return c.exact
	}
	if c.kube != o.kube {
		return c.kube
	}
	return c.host < o.host
}

// buildTable turns a NameTable into a lookup table. Entries whose name cannot be a DNS name
// or that hold no parseable address are skipped (and counted), as in Istio.
func buildTable(nt *ndspb.NameTable, n naming) *table {
	t := &table{src: nt, byHost: make(map[string]*entry, len(nt.GetTable()))}
	hosts := make([]string, 0, len(nt.GetTable()))
	for h := range nt.GetTable() {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	claims := make(map[string]candidate, len(hosts)*2)
	for _, h := range hosts {
		ni := nt.GetTable()[h]
		e := newEntry(ni.GetIps())
		if e == nil {
			t.skipped++
			continue
		}
		fqdn := normalizeName(h)
		kube := ni.GetRegistry() == registryKubernetes
		usable := false
		for _, name := range n.altNames(h, ni) {
			if !validName(name) {
				continue
			}
			usable = true
			c := candidate{e: e, host: h, exact: name == fqdn, kube: kube}
			if old, ok := claims[name]; !ok || c.beats(old) {
				claims[name] = c
			}
		}
		if !usable {
			t.skipped++
			continue
		}
		t.byHost[h] = e
	}
	t.names = make(map[string]*entry, len(claims)*2)
	for name, c := range claims {
		t.names[name] = c.e
		if strings.HasPrefix(name, "*.") {
			t.wildcards = true
		}
	}
	if n.search != "" {
		t.searchWire = len(n.search) + 1
		for name, c := range claims {
			if strings.HasSuffix(name, n.search) { // a plain suffix test, as Istio's buildDNSAnswers
				continue
			}
			long := name + n.search
			if _, taken := claims[long]; taken || len(long)+1 > maxNameWire {
				continue // a shortcut never shadows a name Istiod sent
			}
			t.names[long] = &entry{target: c.e}
		}
	}
	return t
}

// newEntry encodes the addresses of ips, skipping unparseable and duplicate ones; nil when
// none is usable.
func newEntry(ips []string) *entry {
	e := &entry{}
	seen := make(map[netip.Addr]struct{}, len(ips))
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		// As Istio's ParseIPsSplitToV4V6: an IPv4-mapped IPv6 address stays IPv6 (AAAA).
		a = a.WithZone("")
		if _, dup := seen[a]; dup {
			continue
		}
		seen[a] = struct{}{}
		if a.Is4() {
			v := a.As4()
			e.a = appendAddrTail(e.a, typeA, v[:])
		} else {
			v := a.As16()
			e.aaaa = appendAddrTail(e.aaaa, typeAAAA, v[:])
		}
	}
	if len(e.a) == 0 && len(e.aaaa) == 0 {
		return nil
	}
	return e
}

func appendAddrTail(b []byte, rrtype uint16, ip []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, rrtype)
	b = binary.BigEndian.AppendUint16(b, classINET)
	b = binary.BigEndian.AppendUint32(b, ttlSeconds)
	b = binary.BigEndian.AppendUint16(b, uint16(len(ip)))
	return append(b, ip...)
}
