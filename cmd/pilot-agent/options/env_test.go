package options

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wingman-mesh/wingman/transport/istiod"
)

func TestDefaults(t *testing.T) {
	e, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.MinimumDrainDuration != 5*time.Second || e.ExitOnZeroActiveConnections || !e.EnvoySkipDeprecatedLogs ||
		e.EnvoyStatusPort != 15021 || e.EnvoyPrometheusPort != 15090 || e.DNSProxyAddr != "localhost:15053" ||
		e.GRPCXDSBootstrap != "etc/istio/proxy/grpc-bootstrap.json" || !e.DeltaXDS || e.CAProvider != "Citadel" ||
		e.PilotCertProvider != "istiod" || e.TrustDomain != "cluster.local" || e.SecretTTL != 24*time.Hour ||
		e.WorkloadRSAKeySize != 2048 || e.ECCCurve != "P256" || e.WorkloadIdentitySocketFile != "socket" ||
		e.GRPCMaxRecvMsgSize != 4<<20 || e.GRPCMaxStreams != 100000 || !slices.Equal(e.TokenAudiences, []string{"istio-ca"}) ||
		e.PeerMetadataDiscovery != nil || e.InstanceIP.IsValid() {
		t.Errorf("defaults differ from Istio's: %+v", e)
	}
}

func TestValues(t *testing.T) {
	e, err := Parse([]string{
		"INSTANCE_IP=10.0.0.5", "HOST_IP=fd00::1", "EXIT_ON_ZERO_ACTIVE_CONNECTIONS=true", "MINIMUM_DRAIN_DURATION=20s",
		"XDS_HEADER_X-Foo=bar", "CA_HEADER_Auth=t", "ISTIO_META_MESH_ID=m1", "ISTIO_META_CLUSTER_ID=c1",
		"BLOCKED_CIDRS_IN_WASM_FETCH=10.0.0.0/8, 192.168.0.0/16", "CLOUD_PLATFORM=AWS", "PEER_METADATA_DISCOVERY=false",
		"ISTIO_KUBE_APP_PROBERS={\"/app-health/a/livez\":{}}", "PILOT_CERT_PROVIDER=k8s.io/my-signer", "NOT_OURS=x",
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.InstanceIP != netip.MustParseAddr("10.0.0.5") || e.HostIP != "fd00::1" || !e.ExitOnZeroActiveConnections ||
		e.MinimumDrainDuration != 20*time.Second || e.XDSHeaders["X-Foo"] != "bar" || e.CAHeaders["Auth"] != "t" ||
		e.Meta["MESH_ID"] != "m1" || e.ClusterID != "c1" || len(e.BlockedCIDRsInWasmFetch) != 2 ||
		e.CloudPlatform != "aws" || e.PeerMetadataDiscovery == nil || *e.PeerMetadataDiscovery {
		t.Errorf("parsed %+v", e)
	}
	if len(e.Environ) != 14 {
		t.Errorf("Environ has %d entries", len(e.Environ))
	}
}

func TestBadValuesNameTheVariable(t *testing.T) {
	for _, tc := range []struct{ kv, name string }{
		{"EXIT_ON_ZERO_ACTIVE_CONNECTIONS=yes please", "EXIT_ON_ZERO_ACTIVE_CONNECTIONS"},
		{"MINIMUM_DRAIN_DURATION=5", "MINIMUM_DRAIN_DURATION"},
		{"MINIMUM_DRAIN_DURATION=-5s", "MINIMUM_DRAIN_DURATION"},
		{"ENVOY_STATUS_PORT=70000", "ENVOY_STATUS_PORT"},
		{"ISTIO_CPU_LIMIT=two", "ISTIO_CPU_LIMIT"},
		{"INSTANCE_IP=10.0.0", "INSTANCE_IP"},
		{"HOST_IP=node-1", "HOST_IP"},
		{"SECRET_GRACE_PERIOD_RATIO=1.5", "SECRET_GRACE_PERIOD_RATIO"},
		{"ECC_CURVE=P521", "ECC_CURVE"},
		{"CA_PROVIDER=Vault", "CA_PROVIDER"},
		{"PILOT_CERT_PROVIDER=vault", "PILOT_CERT_PROVIDER"},
		{"JWT_POLICY=none", "JWT_POLICY"},
		{"COMPLIANCE_POLICY=fips", "COMPLIANCE_POLICY"},
		{"CLOUD_PLATFORM=ibm", "CLOUD_PLATFORM"},
		{"DNS_PROXY_ADDR=15053", "DNS_PROXY_ADDR"},
		{"WORKLOAD_IDENTITY_SOCKET_FILE=/var/run/socket", "WORKLOAD_IDENTITY_SOCKET_FILE"},
		{"BLOCKED_CIDRS_IN_WASM_FETCH=10.0.0.0/33", "BLOCKED_CIDRS_IN_WASM_FETCH"},
		{"ISTIO_KUBE_APP_PROBERS={not json", "ISTIO_KUBE_APP_PROBERS"},
		{"ISTIO_GPRC_MAXSTREAMS=0", "ISTIO_GPRC_MAXSTREAMS"},
		{"PEER_METADATA_DISCOVERY=maybe", "PEER_METADATA_DISCOVERY"},
		{"AUTOMEMLIMIT=0", "AUTOMEMLIMIT"},
		{"AUTOMEMLIMIT=1.2", "AUTOMEMLIMIT"},
		{"AUTOMEMLIMIT=on", "AUTOMEMLIMIT"},
	} {
		_, err := Parse([]string{tc.kv})
		if err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: err = %v, want it to name %s", tc.kv, err, tc.name)
		}
	}
}

// TestCompliancePolicyNames: COMPLIANCE_POLICY takes exactly the policies transport/istiod
// defines (names spelled there only), each giving a Compliance.
func TestCompliancePolicyNames(t *testing.T) {
	names := istiod.CompliancePolicies()
	if len(names) == 0 {
		t.Fatal("no compliance policy")
	}
	for _, name := range names {
		e, err := Parse([]string{"COMPLIANCE_POLICY=" + name})
		if err != nil || e.CompliancePolicy != name {
			t.Errorf("%s: parsed %q, %v", name, e.CompliancePolicy, err)
		}
		if _, err := istiod.CompliancePolicy(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Parse([]string{"COMPLIANCE_POLICY=fips-140"}); err == nil || !strings.Contains(err.Error(), strings.Join(names, ", ")) {
		t.Errorf("unknown policy: %v, want the known ones listed", err)
	}
}

func TestMemLimitRatio(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want float64
	}{
		{nil, 0.9}, // Istio's agent: automemlimit's default
		{[]string{"AUTOMEMLIMIT=0.5"}, 0.5},
		{[]string{"AUTOMEMLIMIT=1"}, 1},
		{[]string{"AUTOMEMLIMIT=off"}, 0},
		{[]string{"GOMEMLIMIT=300MiB"}, 0}, // the runtime applies it
		{[]string{"GOMEMLIMIT=300MiB", "AUTOMEMLIMIT=0.5"}, 0},
	} {
		e, err := Parse(tc.env)
		if err != nil || e.MemLimitRatio != tc.want {
			t.Errorf("%v: ratio %v, %v; want %v", tc.env, e.MemLimitRatio, err, tc.want)
		}
	}
}

func TestAllBadValuesReportedTogether(t *testing.T) {
	_, err := Parse([]string{"ECC_CURVE=x", "DISABLE_ENVOY=x"})
	if err == nil || !strings.Contains(err.Error(), "ECC_CURVE") || !strings.Contains(err.Error(), "DISABLE_ENVOY") {
		t.Fatalf("err = %v", err)
	}
}

func TestConflicts(t *testing.T) {
	_, err := Parse([]string{"FILE_MOUNTED_CERTS=true", "PROV_CERT=/etc/certs"})
	if err == nil || !strings.Contains(err.Error(), "FILE_MOUNTED_CERTS") || !strings.Contains(err.Error(), "PROV_CERT") {
		t.Fatalf("err = %v", err)
	}
}

// TestEveryVariableDocumented keeps --help in step with Parse.
func TestEveryVariableDocumented(t *testing.T) {
	_, seen, err := parse(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]bool{}
	for _, g := range Documented {
		for _, v := range g.Vars {
			if doc[v.Name] {
				t.Errorf("%s documented twice", v.Name)
			}
			doc[v.Name] = true
		}
	}
	for n := range seen {
		if !doc[n] {
			t.Errorf("%s is parsed but not documented", n)
		}
	}
	for n := range doc {
		if !seen[n] {
			t.Errorf("%s is documented but not parsed", n)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("MINIMUM_DRAIN_DURATION=5s", "ENVOY_STATUS_PORT=15021")
	f.Add("BLOCKED_CIDRS_IN_WASM_FETCH=,,10.0.0.0/8", "ISTIO_KUBE_APP_PROBERS={}")
	f.Fuzz(func(t *testing.T, a, b string) {
		e, err := Parse([]string{a, b})
		if err == nil && e == nil {
			t.Fatal("nil Env without error")
		}
	})
}

// TestRepeatedVariableFirstWins: a variable given twice takes its first value, and Envoy's
// environment keeps only that entry, as Istio's agent, which reads os.Getenv and passes
// os.Environ on, sees it (Go keeps a repeated name's first entry: internal/environ's test runs a
// process to check that).
func TestRepeatedVariableFirstWins(t *testing.T) {
	e, err := Parse([]string{"POD_NAME=first", "OTHER=x", "POD_NAME=second"})
	if err != nil {
		t.Fatal(err)
	}
	if e.PodName != "first" {
		t.Errorf("POD_NAME = %q, want the first entry", e.PodName)
	}
	if want := []string{"POD_NAME=first", "OTHER=x"}; !slices.Equal(e.Environ, want) {
		t.Errorf("Environ = %q, want %q", e.Environ, want)
	}
}
