package bootstrap

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"slices"
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
	// topologyLocalityLabel ranks first from 1.29 (GetLocalityLabel).
	topologyLocalityLabel = "topology.istio.io/locality"
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
	// GetNodeMetaData reads DNS_PROXY_ADDR from 1.31.0-rc.0 on (config.go).
	if v, ok := environ.Lookup(cfg.Env, "DNS_PROXY_ADDR"); ok && v != "" && releaseOf(cfg).secureMetricsAndSelfDiscovery() {
		raw["DNS_PROXY_ADDR"] = v
		from["DNS_PROXY_ADDR"] = "DNS_PROXY_ADDR"
	}

	// Decode key by key so a type error names the key and its source, in sorted key order:
	// Istio decodes json.Marshal(raw), whose keys encoding/json sorts, and a key matches its
	// field exactly or ignoring case, so of two keys that name one field ("POD_PORTS",
	// "pod_ports") the last in byte order sets it.
	m := &Metadata{}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if err := m.setKey(k, raw[k]); err != nil {
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

	labels, static, err := podLabels(cfg, m.Labels)
	if err != nil {
		return err
	}
	m.Labels, m.StaticLabels = labels, static
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

// podLabels gives LABELS and STATIC_LABELS as GetNodeMetaData builds them (config.go at every
// supported tag): ISTIO_METAJSON_LABELS, when a non-empty object of strings, becomes both, one
// map shared by the two; when the pod's labels file is read, LABELS becomes a new map (that
// object, then the file's labels). The locality label is then rewritten in LABELS, dots to
// slashes, so STATIC_LABELS shows the rewrite exactly when no labels file was read (the shared
// map), and keeps the label as given otherwise. From 1.29 the locality is read from
// topology.istio.io/locality when that label is present, else istio-locality
// (pkg/model/proxy.go GetLocalityLabel); 1.28 reads istio-locality only. Either way it is written
// back as istio-locality.
func podLabels(cfg Config, decoded map[string]string) (labels, static map[string]string, err error) {
	if v, ok := environ.Lookup(cfg.Env, metaJSONPrefix+"LABELS"); ok {
		if json.Unmarshal([]byte(v), &static) != nil || len(static) == 0 {
			static = nil
		}
	}
	labels = decoded
	if static != nil {
		labels = static
	}
	if cfg.LabelsFile != "" {
		fileLabels, err := proxyconfig.ReadPodInfoFile(cfg.LabelsFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("labels: %w", err)
		}
		if err == nil {
			// Istio starts from STATIC_LABELS; decoded holds the same object (NodeMetadata puts
			// ISTIO_METAJSON_LABELS under LABELS) and also keeps labels the metadata variables
			// gave otherwise, so the metadata reads back as written.
			labels = map[string]string{}
			maps.Copy(labels, decoded)
			maps.Copy(labels, fileLabels)
			delete(labels, "pod-template-hash") // Istio skips it among the file's labels
		}
	}
	loc, found := "", false
	if releaseOf(cfg).topologyLocality() {
		loc, found = labels[topologyLocalityLabel]
	}
	if !found {
		loc = labels[localityLabel]
	}
	if loc != "" {
		if !strings.Contains(loc, "/") {
			loc = strings.ReplaceAll(loc, ".", "/")
		}
		labels[localityLabel] = loc
	}
	if len(labels) == 0 {
		labels = nil
	}
	return labels, static, nil
}

func releaseOf(cfg Config) Release {
	r, _ := ReleaseOf(cfg.IstioVersion)
	return r
}

// metadataDiscovery: PEER_METADATA_DISCOVERY when set, else ENABLE_HBONE.
func metadataDiscovery(cfg Config, m *Metadata) bool {
	if cfg.MetadataDiscovery != nil {
		return *cfg.MetadataDiscovery
	}
	return bool(m.EnableHBONE)
}
