package main

import (
	"bytes"
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

//go:embed resources/*.tmpl
var resourceTemplates embed.FS

// service is one demo service as the resources describe it.
type service struct {
	Name      string // alpha
	Host      string // alpha.demo.svc.cluster.local
	ClusterIP string // what DNS answers for Host (from the NameTable)
	Port      int    // where the proxyless server listens on 127.0.0.1
	Cluster   string // outbound|7070||alpha.demo.svc.cluster.local
	RouteTo   string // the cluster the client-side route sends to (Cluster unless re-routed)
}

// mesh is the template input.
type mesh struct {
	Namespace   string
	ServicePort int // the port in the xds:/// target names
	EnvoyPort   int // where Envoy's one listener listens (a real Envoy binds it)
	SpiffeID    string
	Services    []service
}

// newMesh lays out the mesh; ports are alpha's, beta's and Envoy's listener's.
func newMesh(ns, spiffeID string, ports []int) mesh {
	m := mesh{Namespace: ns, ServicePort: 7070, SpiffeID: spiffeID, EnvoyPort: ports[2]}
	for i, name := range []string{"alpha", "beta"} {
		host := name + "." + ns + ".svc.cluster.local"
		m.Services = append(m.Services, service{
			Name: name, Host: host, ClusterIP: fmt.Sprintf("10.96.0.%d", 10+i), Port: ports[i],
			Cluster: fmt.Sprintf("outbound|%d||%s", m.ServicePort, host),
		})
		m.Services[i].RouteTo = m.Services[i].Cluster
	}
	return m
}

// target is the xds:/// name a client dials for s.
func (m mesh) target(s service) string { return fmt.Sprintf("xds:///%s:%d", s.Host, m.ServicePort) }

// writeResources renders every template into dir (name.yaml.tmpl → name.yaml).
func writeResources(dir string, m mesh) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := resourceTemplates.ReadDir("resources")
	if err != nil {
		return err
	}
	for _, e := range entries {
		t, err := template.ParseFS(resourceTemplates, "resources/"+e.Name())
		if err != nil {
			return fmt.Errorf("demo resources %s: %w", e.Name(), err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, m); err != nil {
			return fmt.Errorf("demo resources %s: %w", e.Name(), err)
		}
		if err := os.WriteFile(filepath.Join(dir, strings.TrimSuffix(e.Name(), ".tmpl")), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
