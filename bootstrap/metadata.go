package bootstrap

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"strconv"
	"strings"

	"github.com/wingman-mesh/wingman/bootstrap/proxyconfig"
	"github.com/wingman-mesh/wingman/internal/environ"
	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

const (
	metaPrefix     = "ISTIO_META_"
	metaJSONPrefix = "ISTIO_METAJSON_"
	// localityLabel is the label Istio's GetNodeMetaData reads the locality from
	// (model.LocalityLabel): dots stand for slashes, as label values cannot hold a slash.
	localityLabel = "istio-locality"
)

// NodeMetadata builds the node metadata as Istio's GetNodeMetaData does, steps 1-7 of the spec:
// proxyMetadata ISTIO_META_ keys, then ISTIO_META_* variables, then ISTIO_METAJSON_* objects merged
// at the top level, then DNS_PROXY_ADDR; the result is decoded into the typed struct (a value of the
// wrong type is an error naming the key and the variable it came from); then the agent's own facts
// overwrite their keys.
func NodeMetadata(cfg Config, ips []string) (*Metadata, error) {
	pc := cfg.ProxyConfig
	if pc == nil {
		return nil, errors.New("bootstrap: Config.ProxyConfig is nil")
	}
	raw := map[string]any{}
	from := map[string]string{} // metadata key -> where it came from, for errors

	for k, v := range pc.GetProxyMetadata() {
		if key, ok := strings.CutPrefix(k, metaPrefix); ok && key != "" {
			raw[key] = v
			from[key] = "proxyMetadata " + k
		}
	}
	var jsonVars []string
	for _, kv := range environ.Unique(cfg.Env) { // a repeated variable: its first entry, as os.Environ
		name, val, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if key, ok := strings.CutPrefix(name, metaPrefix); ok && key != "" {
			raw[key] = val
			from[key] = name
		} else if strings.HasPrefix(name, metaJSONPrefix) {
			jsonVars = append(jsonVars, kv)
		}
	}
	for _, kv := range jsonVars {
		name, val, _ := strings.Cut(kv, "=")
		var obj map[string]any
		if err := json.Unmarshal([]byte(val), &obj); err != nil {
			return nil, fmt.Errorf("%s: not a JSON object: %w", name, err)
		}
		for k, v := range obj {
			raw[k] = v
			from[k] = name
		}
		if name == metaJSONPrefix+"LABELS" { // also the base of LABELS, under the pod's own labels
			raw["LABELS"] = obj
			from["LABELS"] = name
		}
	}
	if v, ok := environ.Lookup(cfg.Env, "DNS_PROXY_ADDR"); ok && v != "" {
		raw["DNS_PROXY_ADDR"] = v
		from["DNS_PROXY_ADDR"] = "DNS_PROXY_ADDR"
	}

	m := &Metadata{}
	for k, v := range raw {
		// Decode key by key so a type error names the key and its source.
		if err := m.setKey(k, v); err != nil {
			return nil, fmt.Errorf("node metadata key %s (from %s): %w", k, from[k], err)
		}
	}
	m.Raw = raw

	if err := setAgentFacts(m, cfg, ips); err != nil {
		return nil, err
	}
	return m, nil
}

func setAgentFacts(m *Metadata, cfg Config, ips []string) error {
	pc := cfg.ProxyConfig
	if cfg.IstioVersion != "" && m.IstioVersion == "" {
		m.IstioVersion = cfg.IstioVersion
	}
	m.InstanceIPs = ips
	if cfg.STSPort != 0 {
		m.StsPort = strconv.Itoa(cfg.STSPort)
	}
	m.EnvoyStatusPort = cfg.EnvoyStatusPort
	m.EnvoyPrometheusPort = cfg.EnvoyPrometheusPort
	m.EnvoySecureMetricsPort = cfg.EnvoySecureMetricsPort
	m.EnvoySecureMergedMetricsPort = cfg.EnvoySecureMergedMetricsPort
	m.ExitOnZeroActiveConnections = StringBool(cfg.ExitOnZeroActiveConnections)
	md := StringBool(metadataDiscovery(cfg, m))
	m.MetadataDiscovery = &md
	m.EnvoySkipDeprecatedLogs = StringBool(cfg.EnvoySkipDeprecatedLogs)
	// Istio's GetNodeMetaData always sets it, the default "socket" included.
	m.WorkloadIdentitySocketFile = cfg.WorkloadIdentitySocketFile
	if m.WorkloadIdentitySocketFile == "" {
		m.WorkloadIdentitySocketFile = DefaultSocketFile
	}
	m.ProxyConfig = &ProxyConfigJSON{pc}
	m.InstanceName = cfg.PodName
	m.Namespace = cfg.PodNamespace
	m.ServiceAccount = cfg.ServiceAccount

	labels := map[string]string{}
	maps.Copy(labels, m.Labels)
	if cfg.LabelsFile != "" {
		fileLabels, err := proxyconfig.ReadPodInfoFile(cfg.LabelsFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("labels: %w", err)
		}
		maps.Copy(labels, fileLabels)
	}
	delete(labels, "pod-template-hash")
	// Istio's GetNodeMetaData rewrites the label in place with model.GetLocalityLabel: dots
	// become slashes unless the value already holds a slash.
	if loc := labels[localityLabel]; loc != "" && !strings.Contains(loc, "/") {
		labels[localityLabel] = strings.ReplaceAll(loc, ".", "/")
	}
	// STATIC_LABELS: ISTIO_METAJSON_LABELS when it is a non-empty object of strings, as Istio's
	// extractAttributesMetadata sets it (a key of the metadata variables otherwise).
	if v, ok := environ.Lookup(cfg.Env, metaJSONPrefix+"LABELS"); ok {
		var static map[string]string
		if json.Unmarshal([]byte(v), &static) == nil && len(static) > 0 {
			m.StaticLabels = static
		}
	}
	if len(labels) > 0 {
		m.Labels = labels
	}
	if cfg.AnnotationsFile != "" {
		ann, err := proxyconfig.ReadPodInfoFile(cfg.AnnotationsFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("annotations: %w", err)
		}
		if len(ann) > 0 {
			m.Annotations = ann
		}
	}
	if len(cfg.PlatformMetadata) > 0 {
		m.PlatformMetadata = maps.Clone(cfg.PlatformMetadata)
	}
	if pc.GetControlPlaneAuthPolicy() == meshapi.AuthenticationPolicy_MUTUAL_TLS {
		host, _, err := net.SplitHostPort(pc.GetDiscoveryAddress())
		if err != nil {
			return fmt.Errorf("ProxyConfig field discoveryAddress %q: %w", pc.GetDiscoveryAddress(), err)
		}
		if host == "localhost" {
			host = "istiod.istio-system.svc"
		}
		m.PilotSubjectAltName = []string{host}
	}
	if cfg.OutlierLogPath != "" {
		m.OutlierLogPath = cfg.OutlierLogPath
	}
	if cfg.CredentialSocketExists {
		m.Raw["credential"] = "true"
	}
	if cfg.FileCredential {
		m.Raw["file-credential"] = "true"
	}
	return nil
}

// metadataDiscovery: PEER_METADATA_DISCOVERY when set, else ENABLE_HBONE.
func metadataDiscovery(cfg Config, m *Metadata) bool {
	if cfg.MetadataDiscovery != nil {
		return *cfg.MetadataDiscovery
	}
	return bool(m.EnableHBONE)
}
