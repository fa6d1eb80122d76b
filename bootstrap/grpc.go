package bootstrap

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// GRPCBootstrap is the proxyless gRPC xDS bootstrap (grpc-go's xds bootstrap JSON).
type GRPCBootstrap struct {
	XDSServers                         []GRPCXDSServer             `json:"xds_servers"`
	Node                               GRPCNode                    `json:"node"`
	CertificateProviders               map[string]GRPCCertProvider `json:"certificate_providers,omitempty"`
	ServerListenerResourceNameTemplate string                      `json:"server_listener_resource_name_template,omitempty"`
}

// GRPCXDSServer is one xds_servers entry.
type GRPCXDSServer struct {
	ServerURI      string             `json:"server_uri"`
	ChannelCreds   []GRPCChannelCreds `json:"channel_creds"`
	ServerFeatures []string           `json:"server_features"`
}

// GRPCChannelCreds is a channel_creds entry.
type GRPCChannelCreds struct {
	Type string `json:"type"`
}

// GRPCNode is the bootstrap node.
type GRPCNode struct {
	ID       string          `json:"id"`
	Locality *Locality       `json:"locality,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// GRPCCertProvider is a certificate_providers entry.
type GRPCCertProvider struct {
	PluginName string            `json:"plugin_name"`
	Config     FileWatcherConfig `json:"config"`
}

// FileWatcherConfig is the file_watcher plugin config.
type FileWatcherConfig struct {
	CertificateFile   string `json:"certificate_file"`
	PrivateKeyFile    string `json:"private_key_file"`
	CACertificateFile string `json:"ca_certificate_file"`
	RefreshInterval   string `json:"refresh_interval"`
}

// BuildGRPCBootstrap returns the gRPC bootstrap for cfg: the agent's XDS socket as the only server,
// the node with GENERATOR=grpc metadata, and, when outputCertsDir is set (OUTPUT_CERTS), a
// file_watcher provider named "default" for the certificates the agent writes there.
func BuildGRPCBootstrap(cfg Config, outputCertsDir string) (*GRPCBootstrap, error) {
	st, err := newState(cfg)
	if err != nil {
		return nil, err
	}
	st.meta.Generator = "grpc"
	meta, err := st.meta.MarshalJSON()
	if err != nil {
		return nil, err
	}
	sock, err := filepath.Abs(cfg.xdsSocket())
	if err != nil {
		return nil, fmt.Errorf("gRPC bootstrap: XDS socket path: %w", err)
	}
	b := &GRPCBootstrap{
		XDSServers: []GRPCXDSServer{{
			ServerURI:      "unix://" + sock,
			ChannelCreds:   []GRPCChannelCreds{{Type: "insecure"}},
			ServerFeatures: []string{"xds_v3"},
		}},
		Node:                               GRPCNode{ID: st.nodeID, Locality: st.locality, Metadata: meta},
		ServerListenerResourceNameTemplate: "xds.istio.io/grpc/lds/inbound/%s",
	}
	if outputCertsDir != "" {
		b.CertificateProviders = map[string]GRPCCertProvider{"default": {
			PluginName: "file_watcher",
			Config: FileWatcherConfig{
				CertificateFile:   filepath.Join(outputCertsDir, "cert-chain.pem"),
				PrivateKeyFile:    filepath.Join(outputCertsDir, "key.pem"),
				CACertificateFile: filepath.Join(outputCertsDir, "root-cert.pem"),
				RefreshInterval:   "900s",
			},
		}}
	}
	return b, nil
}

// WriteGRPCBootstrap renders the gRPC bootstrap and writes it atomically (0644, dir 0700) to path
// (GRPC_XDS_BOOTSTRAP).
func WriteGRPCBootstrap(path string, cfg Config, outputCertsDir string) error {
	b, err := BuildGRPCBootstrap(cfg, outputCertsDir)
	if err != nil {
		return err
	}
	// Written without reflection (jsonw.go), byte for byte as json.MarshalIndent(b, "", "  ").
	data, err := appendIndented(make([]byte, 0, 4<<10), b)
	if err != nil {
		return fmt.Errorf("gRPC bootstrap: %w", err)
	}
	return WriteFile(path, data, 0o644)
}

// ParseGRPCBootstrap parses a gRPC bootstrap strictly enough for readiness: JSON, at least one
// xds server with a URI, a node id.
func ParseGRPCBootstrap(data []byte) (*GRPCBootstrap, error) {
	var b GRPCBootstrap
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("gRPC bootstrap: %w", err)
	}
	if len(b.XDSServers) == 0 || b.XDSServers[0].ServerURI == "" {
		return nil, errors.New("gRPC bootstrap: field xds_servers: no server_uri")
	}
	if b.Node.ID == "" {
		return nil, errors.New("gRPC bootstrap: field node.id: empty")
	}
	return &b, nil
}

// ProbeGRPCBootstrap is the readiness check for proxyless gRPC: the file at path parses, and every
// file_watcher provider it names has its files present.
func ProbeGRPCBootstrap(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("gRPC bootstrap %s: %w", path, err)
	}
	b, err := ParseGRPCBootstrap(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var missing []string
	for name, p := range b.CertificateProviders {
		if p.PluginName != "file_watcher" {
			continue
		}
		for _, f := range []string{p.Config.CertificateFile, p.Config.PrivateKeyFile, p.Config.CACertificateFile} {
			if f == "" {
				continue
			}
			if _, err := os.Stat(f); err != nil {
				missing = append(missing, name+": "+f)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("gRPC bootstrap %s: certificate files not present yet: %s", path, strings.Join(missing, ", "))
	}
	return nil
}
