package dns

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
)

// Istio's ranges for auto-allocated ServiceEntry addresses (Class E and a documentation-like
// IPv6 prefix); listed in /debug/ndsz so an operator can tell allocated addresses apart.
var autoAllocRanges = []netip.Prefix{
	netip.MustParsePrefix("240.240.0.0/16"),
	netip.MustParsePrefix("2001:2::/48"),
}

// ndszHost is one NameTable entry in /debug/ndsz: the fields of Istio's NameInfo (protojson
// names) plus what the agent generated from it.
type ndszHost struct {
	IPs       []string `json:"ips,omitempty"`
	Registry  string   `json:"registry,omitempty"`
	Shortname string   `json:"shortname,omitempty"`
	Namespace string   `json:"namespace,omitempty"`
	AltHosts  []string `json:"altHosts,omitempty"`
	// Names are every name answered with this entry's addresses, generated alt hosts included.
	Names []string `json:"names,omitempty"`
	// SearchShortcuts are the names answered with a CNAME to one of Names.
	SearchShortcuts []string `json:"searchShortcuts,omitempty"`
	// AutoAllocatedIPs are the IPs inside Istio's auto-allocation ranges.
	AutoAllocatedIPs []string `json:"autoAllocatedIps,omitempty"`
	// Skipped is set when the entry answers nothing (no usable address or name).
	Skipped bool `json:"skipped,omitempty"`
}

type ndszDoc struct {
	Ready        bool                `json:"ready"`
	AutoAllocate bool                `json:"autoAllocate"`
	SearchDomain string              `json:"searchDomain,omitempty"`
	Names        int                 `json:"lookupNames"`
	Table        map[string]ndszHost `json:"table"`
}

// NDSZ returns the current NameTable as JSON for the status server's /debug/ndsz, with the
// names the agent generated for each host. Before the first table it reports ready=false and
// an empty table.
func (s *Server) NDSZ() ([]byte, error) {
	doc := ndszDoc{
		AutoAllocate: s.cfg.AutoAllocate,
		SearchDomain: s.naming.search,
		Table:        map[string]ndszHost{},
	}
	if t := s.tab.Load(); t != nil {
		doc.Ready = true
		doc.Names = len(t.names)
		shortcuts := make(map[*entry][]string)
		for name, e := range t.names {
			if e.target != nil {
				shortcuts[e.target] = append(shortcuts[e.target], name)
			}
		}
		for h, ni := range t.src.GetTable() {
			out := ndszHost{
				IPs: ni.GetIps(), Registry: ni.GetRegistry(), Shortname: ni.GetShortname(),
				Namespace: ni.GetNamespace(), AltHosts: ni.GetAltHosts(),
			}
			e := t.byHost[h]
			out.Skipped = e == nil
			for _, name := range s.naming.altNames(h, ni) {
				if e != nil && t.names[name] == e {
					out.Names = append(out.Names, name)
				}
			}
			for _, name := range shortcuts[e] {
				if base := name[:len(name)-len(s.naming.search)]; t.names[base] == e {
					out.SearchShortcuts = append(out.SearchShortcuts, name)
				}
			}
			sort.Strings(out.Names)
			sort.Strings(out.SearchShortcuts)
			for _, ip := range ni.GetIps() {
				if a, err := netip.ParseAddr(ip); err == nil && autoAllocated(a.Unmap()) {
					out.AutoAllocatedIPs = append(out.AutoAllocatedIPs, ip)
				}
			}
			doc.Table[h] = out
		}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("dns: encode ndsz: %w", err)
	}
	return b, nil
}

func autoAllocated(a netip.Addr) bool {
	for _, p := range autoAllocRanges {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
