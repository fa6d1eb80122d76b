package proxyconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strconv"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/wingman-mesh/wingman/meshconfig/meshapi"
)

// Annotation names that change the ProxyConfig (istio.io/api/annotation).
const (
	AnnotationProxyConfig      = "proxy.istio.io/config"
	AnnotationDiscoveryAddress = "sidecar.istio.io/discoveryAddress"
	AnnotationStatusPort       = "status.sidecar.istio.io/port"
)

// SourceProxyConfigEnv names the PROXY_CONFIG variable in errors.
const SourceProxyConfigEnv = "PROXY_CONFIG"

// Sources says where each layer comes from. Empty fields are skipped; a file that does not exist is
// skipped too (outside Kubernetes neither the mesh file nor the downward-API file exists), while a file
// that exists but does not parse is an error.
type Sources struct {
	MeshConfigFile  string // e.g. ./etc/istio/config/mesh (MeshConfig YAML; its defaultConfig is used)
	ProxyConfigEnv  string // the PROXY_CONFIG value (ProxyConfig YAML or JSON)
	AnnotationsFile string // e.g. ./etc/istio/pod/annotations (downward API, key="value" lines)
	// Logger receives warnings (unknown fields Istio also tolerates). Nil discards.
	Logger *slog.Logger
}

// LoadProxyConfig layers the sources over Istio's defaults, with Istio's precedence, and validates the
// result after each layer so an error names the layer that broke it.
func LoadProxyConfig(meshConfigFile, proxyConfigEnv, annotationsFile string) (*meshapi.ProxyConfig, error) {
	return Load(Sources{MeshConfigFile: meshConfigFile, ProxyConfigEnv: proxyConfigEnv, AnnotationsFile: annotationsFile})
}

// Load is LoadProxyConfig with a logger.
func Load(src Sources) (*meshapi.ProxyConfig, error) {
	log := src.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pc := Default()
	// The ProxyConfig descriptor the layers are parsed with: the mesh file's, when one was parsed (its
	// descriptor set has ProxyConfig too), so that one set is built; otherwise meshapi's ProxyConfig
	// set, half the size, which is all a start without a mesh file builds.
	var layerDesc protoreflect.MessageDescriptor

	if src.MeshConfigFile != "" {
		data, err := os.ReadFile(src.MeshConfigFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			log.Debug("mesh config file absent; using defaults", "path", src.MeshConfigFile)
		case err != nil:
			return nil, fmt.Errorf("mesh config %s: %w", src.MeshConfigFile, err)
		default:
			mesh, err := parseMeshConfig(data, src.MeshConfigFile, log)
			if err != nil {
				return nil, err
			}
			layerDesc = defaultConfigDesc(mesh.Descriptor())
			if dc := defaultConfigOf(mesh); dc != nil {
				if err := mergeProxyConfig(pc, dc); err != nil {
					return nil, fmt.Errorf("mesh config %s: defaultConfig: %w", src.MeshConfigFile, err)
				}
			}
			if err := Validate(pc); err != nil {
				return nil, fmt.Errorf("mesh config %s: defaultConfig: %w", src.MeshConfigFile, err)
			}
		}
	}

	if src.ProxyConfigEnv != "" {
		if err := applyLayer(pc, []byte(src.ProxyConfigEnv), SourceProxyConfigEnv, log, layerDesc); err != nil {
			return nil, err
		}
	}

	if src.AnnotationsFile != "" {
		ann, err := ReadPodInfoFile(src.AnnotationsFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			log.Debug("pod annotations file absent", "path", src.AnnotationsFile)
		case err != nil:
			return nil, err
		default:
			if err := applyAnnotations(pc, ann, src.AnnotationsFile, log, layerDesc); err != nil {
				return nil, err
			}
		}
	}
	return pc, nil
}

// applyAnnotations applies the three annotations that change the ProxyConfig, in Istio's order.
func applyAnnotations(pc *meshapi.ProxyConfig, ann map[string]string, file string, log *slog.Logger, md protoreflect.MessageDescriptor) error {
	if v, ok := ann[AnnotationProxyConfig]; ok && v != "" {
		src := fmt.Sprintf("annotation %s in %s", AnnotationProxyConfig, file)
		if err := applyLayer(pc, []byte(v), src, log, md); err != nil {
			return err
		}
	}
	if v, ok := ann[AnnotationDiscoveryAddress]; ok && v != "" {
		pc.DiscoveryAddress = v
		if err := Validate(pc); err != nil {
			return fmt.Errorf("annotation %s in %s: %w", AnnotationDiscoveryAddress, file, err)
		}
	}
	if v, ok := ann[AnnotationStatusPort]; ok && v != "" {
		port, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("annotation %s in %s: field statusPort: %q is not a port number", AnnotationStatusPort, file, v)
		}
		pc.StatusPort = int32(port)
		if err := Validate(pc); err != nil {
			return fmt.Errorf("annotation %s in %s: %w", AnnotationStatusPort, file, err)
		}
	}
	return nil
}

// applyLayer parses one ProxyConfig document, merges it over pc and validates the result.
func applyLayer(pc *meshapi.ProxyConfig, doc []byte, source string, log *slog.Logger, md protoreflect.MessageDescriptor) error {
	layer, err := parseProxyConfigLayer(doc, source, log, md)
	if err != nil {
		return err
	}
	if err := mergeProxyConfig(pc, layer); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	if err := Validate(pc); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	return nil
}
