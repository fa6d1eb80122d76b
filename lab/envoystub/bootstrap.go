package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// bootstrap is the part of Envoy's bootstrap the stand-in uses. Immutable after readBootstrap.
type bootstrap struct {
	node      *core.Node
	apiType   string // GRPC or DELTA_GRPC
	xdsPipe   string // absolute path of the xds-grpc cluster's pipe
	sdsPipe   string // absolute path of the sds-grpc cluster's pipe ("" when absent)
	adminPort int
}

type jsonBootstrap struct {
	Node  json.RawMessage `json:"node"`
	Admin struct {
		Address struct {
			SocketAddress struct {
				PortValue int `json:"port_value"`
			} `json:"socket_address"`
		} `json:"address"`
	} `json:"admin"`
	DynamicResources struct {
		AdsConfig struct {
			APIType string `json:"api_type"`
		} `json:"ads_config"`
	} `json:"dynamic_resources"`
	StaticResources struct {
		Clusters []struct {
			Name           string `json:"name"`
			LoadAssignment struct {
				Endpoints []struct {
					LbEndpoints []struct {
						Endpoint struct {
							Address struct {
								Pipe struct {
									Path string `json:"path"`
								} `json:"pipe"`
							} `json:"address"`
						} `json:"endpoint"`
					} `json:"lb_endpoints"`
				} `json:"endpoints"`
			} `json:"load_assignment"`
		} `json:"clusters"`
	} `json:"static_resources"`
}

// readBootstrap reads the JSON bootstrap at path. Relative pipe paths are taken from the current
// directory, as Envoy does.
func readBootstrap(path string) (*bootstrap, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read bootstrap: %w", err)
	}
	return parseBootstrap(b)
}

func parseBootstrap(b []byte) (*bootstrap, error) {
	var j jsonBootstrap
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("bootstrap is not JSON: %w", err)
	}
	bs := &bootstrap{node: &core.Node{}, apiType: j.DynamicResources.AdsConfig.APIType,
		adminPort: j.Admin.Address.SocketAddress.PortValue}
	if len(j.Node) > 0 {
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(j.Node, bs.node); err != nil {
			return nil, fmt.Errorf("bootstrap node: %w", err)
		}
	}
	switch bs.apiType {
	case "", "GRPC", "AGGREGATED_GRPC":
		bs.apiType = "GRPC"
	case "DELTA_GRPC", "AGGREGATED_DELTA_GRPC":
		bs.apiType = "DELTA_GRPC"
	default:
		return nil, fmt.Errorf("bootstrap ads_config.api_type %q is not supported", bs.apiType)
	}
	for _, c := range j.StaticResources.Clusters {
		if c.Name != "xds-grpc" && c.Name != "sds-grpc" {
			continue
		}
		if len(c.LoadAssignment.Endpoints) == 0 || len(c.LoadAssignment.Endpoints[0].LbEndpoints) == 0 {
			return nil, fmt.Errorf("bootstrap cluster %s has no endpoint", c.Name)
		}
		p := c.LoadAssignment.Endpoints[0].LbEndpoints[0].Endpoint.Address.Pipe.Path
		if p == "" {
			return nil, fmt.Errorf("bootstrap cluster %s has no pipe address", c.Name)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("bootstrap cluster %s pipe %q: %w", c.Name, p, err)
		}
		if c.Name == "xds-grpc" {
			bs.xdsPipe = abs
		} else {
			bs.sdsPipe = abs
		}
	}
	if bs.xdsPipe == "" {
		return nil, fmt.Errorf("bootstrap has no xds-grpc cluster with a pipe address")
	}
	if bs.adminPort <= 0 || bs.adminPort > 65535 {
		return nil, fmt.Errorf("bootstrap admin port %d is not valid", bs.adminPort)
	}
	return bs, nil
}
