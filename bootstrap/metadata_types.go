package bootstrap

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// StringBool is a bool encoded as the JSON string "true"/"false", as Istiod expects.
type StringBool bool

// MarshalJSON implements json.Marshaler.
func (s StringBool) MarshalJSON() ([]byte, error) {
	return []byte(`"` + strconv.FormatBool(bool(s)) + `"`), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *StringBool) UnmarshalJSON(b []byte) error {
	str, err := strconv.Unquote(string(b))
	if err != nil {
		return fmt.Errorf("want a quoted bool, got %s", b)
	}
	v, err := strconv.ParseBool(str)
	if err != nil {
		return fmt.Errorf("want a quoted bool, got %s", b)
	}
	*s = StringBool(v)
	return nil
}

// StringList is a list encoded as one comma-joined JSON string.
type StringList []string

// MarshalJSON implements json.Marshaler.
func (l StringList) MarshalJSON() ([]byte, error) { return json.Marshal(strings.Join(l, ",")) }

// UnmarshalJSON implements json.Unmarshaler.
func (l *StringList) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a comma-separated string: %w", err)
	}
	if s == "" {
		*l = nil
	} else {
		*l = strings.Split(s, ",")
	}
	return nil
}

// PodPort is one container port as the injector lists it in ISTIO_META_POD_PORTS.
type PodPort struct {
	Name          string `json:"name,omitempty"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
}

// PodPortList is a JSON array carried inside a JSON string.
type PodPortList []PodPort

// MarshalJSON implements json.Marshaler.
func (l PodPortList) MarshalJSON() ([]byte, error) {
	inner, err := json.Marshal([]PodPort(l))
	if err != nil {
		return nil, err
	}
	return json.Marshal(string(inner))
}

// UnmarshalJSON implements json.Unmarshaler.
func (l *PodPortList) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a string holding a JSON array: %w", err)
	}
	var ports []PodPort
	if err := json.Unmarshal([]byte(s), &ports); err != nil {
		return fmt.Errorf("string is not a JSON array of ports: %w", err)
	}
	*l = ports
	return nil
}

// ProxyConfigJSON is the ProxyConfig carried in metadata as a JSON object (protojson field names).
type ProxyConfigJSON struct{ *meshapi.ProxyConfig }

// MarshalJSON implements json.Marshaler.
func (p ProxyConfigJSON) MarshalJSON() ([]byte, error) {
	// protojson's bytes, compacted, written by meshapi's generated writer (no descriptors).
	return meshapi.MarshalProtoJSON(p.ProxyConfig)
}

// UnmarshalJSON implements json.Unmarshaler.
func (p *ProxyConfigJSON) UnmarshalJSON(b []byte) error {
	p.ProxyConfig = &meshapi.ProxyConfig{}
	return meshapi.UnmarshalProtoJSON(b, p.ProxyConfig, protojson.UnmarshalOptions{DiscardUnknown: true})
}

// Metadata is the typed node metadata (Istio's NodeMetadata + BootstrapNodeMetadata), key for key and
// encoding for encoding. Raw holds every key, typed or not; MarshalJSON writes the typed fields and
// then any raw key they do not cover.
type Metadata struct {
	ProxyConfig                  *ProxyConfigJSON  `json:"PROXY_CONFIG,omitempty"`
	IstioVersion                 string            `json:"ISTIO_VERSION,omitempty"`
	IstioRevision                string            `json:"ISTIO_REVISION,omitempty"`
	Labels                       map[string]string `json:"LABELS,omitempty"`
	StaticLabels                 map[string]string `json:"STATIC_LABELS,omitempty"`
	Annotations                  map[string]string `json:"ANNOTATIONS,omitempty"`
	InstanceIPs                  StringList        `json:"INSTANCE_IPS,omitempty"`
	Namespace                    string            `json:"NAMESPACE,omitempty"`
	NodeName                     string            `json:"NODE_NAME,omitempty"`
	WorkloadName                 string            `json:"WORKLOAD_NAME,omitempty"`
	InterceptionMode             string            `json:"INTERCEPTION_MODE,omitempty"`
	ServiceAccount               string            `json:"SERVICE_ACCOUNT,omitempty"`
	HTTPProxyPort                string            `json:"HTTP_PROXY_PORT,omitempty"`
	MeshID                       string            `json:"MESH_ID,omitempty"`
	ClusterID                    string            `json:"CLUSTER_ID,omitempty"`
	Network                      string            `json:"NETWORK,omitempty"`
	RequestedNetworkView         StringList        `json:"REQUESTED_NETWORK_VIEW,omitempty"`
	PodPorts                     PodPortList       `json:"POD_PORTS,omitempty"`
	TLSServerCertChain           string            `json:"TLS_SERVER_CERT_CHAIN,omitempty"`
	TLSServerKey                 string            `json:"TLS_SERVER_KEY,omitempty"`
	TLSServerRootCert            string            `json:"TLS_SERVER_ROOT_CERT,omitempty"`
	TLSClientCertChain           string            `json:"TLS_CLIENT_CERT_CHAIN,omitempty"`
	TLSClientKey                 string            `json:"TLS_CLIENT_KEY,omitempty"`
	TLSClientRootCert            string            `json:"TLS_CLIENT_ROOT_CERT,omitempty"`
	CertBaseDir                  string            `json:"BASE,omitempty"`
	IdleTimeout                  string            `json:"IDLE_TIMEOUT,omitempty"`
	HTTP10                       string            `json:"HTTP10,omitempty"`
	Generator                    string            `json:"GENERATOR,omitempty"`
	EnableSelfDiscovery          StringBool        `json:"ENABLE_SELF_DISCOVERY,omitempty"`
	DNSCapture                   StringBool        `json:"DNS_CAPTURE,omitempty"`
	DNSAutoAllocate              StringBool        `json:"DNS_AUTO_ALLOCATE,omitempty"`
	DNSProxyAddr                 string            `json:"DNS_PROXY_ADDR,omitempty"`
	EnableHBONE                  StringBool        `json:"ENABLE_HBONE,omitempty"`
	DisableHBONESend             StringBool        `json:"DISABLE_HBONE_SEND,omitempty"`
	AutoRegisterGroup            string            `json:"AUTO_REGISTER_GROUP,omitempty"`
	WorkloadEntry                string            `json:"WORKLOAD_ENTRY,omitempty"`
	UnprivilegedPod              string            `json:"UNPRIVILEGED_POD,omitempty"`
	PlatformMetadata             map[string]string `json:"PLATFORM_METADATA,omitempty"`
	StsPort                      string            `json:"STS_PORT,omitempty"`
	EnvoyStatusPort              int               `json:"ENVOY_STATUS_PORT,omitempty"`
	EnvoyPrometheusPort          int               `json:"ENVOY_PROMETHEUS_PORT,omitempty"`
	EnvoySecureMetricsPort       int               `json:"ENVOY_SECURE_METRICS_PORT,omitempty"`
	EnvoySecureMergedMetricsPort int               `json:"ENVOY_SECURE_MERGED_METRICS_PORT,omitempty"`
	ExitOnZeroActiveConnections  StringBool        `json:"EXIT_ON_ZERO_ACTIVE_CONNECTIONS,omitempty"`
	InboundListenerExactBalance  StringBool        `json:"INBOUND_LISTENER_EXACT_BALANCE,omitempty"`
	OutboundListenerExactBalance StringBool        `json:"OUTBOUND_LISTENER_EXACT_BALANCE,omitempty"`
	CloudrunAddr                 string            `json:"CLOUDRUN_ADDR,omitempty"`
	MetadataDiscovery            *StringBool       `json:"METADATA_DISCOVERY,omitempty"`
	EnvoySkipDeprecatedLogs      StringBool        `json:"ENVOY_SKIP_DEPRECATED_LOGS,omitempty"`
	WorkloadIdentitySocketFile   string            `json:"WORKLOAD_IDENTITY_SOCKET_FILE,omitempty"`
	InstanceName                 string            `json:"NAME,omitempty"`
	Owner                        string            `json:"OWNER,omitempty"`
	PilotSubjectAltName          []string          `json:"PILOT_SAN,omitempty"`
	OutlierLogPath               string            `json:"OUTLIER_LOG_PATH,omitempty"`
	AppContainers                string            `json:"APP_CONTAINERS,omitempty"`
	IstioProxySHA                string            `json:"ISTIO_PROXY_SHA,omitempty"`

	// Raw is every metadata key with its decoded JSON value, typed keys included.
	Raw map[string]any `json:"-"`
}

// metadataFields is Metadata without its methods, so json sees the plain struct.
type metadataFields Metadata

// MarshalJSON writes the typed keys, then every raw key not among them, in sorted key order:
// the bytes json.Marshal would make of the typed struct merged with the raw map (the typed
// field wins, as in Istio's nodeMetadataConverter), written without reflection
// (metadata_json.go).
func (m *Metadata) MarshalJSON() ([]byte, error) {
	w := jsonWriter{buf: make([]byte, 0, 4<<10)}
	m.appendJSON(&w)
	if w.err != nil {
		return nil, w.err
	}
	return w.buf, nil
}

// UnmarshalJSON reads metadata the way Istiod does: typed fields plus the raw map.
func (m *Metadata) UnmarshalJSON(b []byte) error {
	var f metadataFields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = Metadata(f)
	m.Raw = raw
	return nil
}
