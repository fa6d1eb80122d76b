package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/wingman-mesh/wingman/lab/testca"
)

// TestCASettingsEndToEnd runs the agent against a real CA (internal/testca over TLS) and a real
// xDS server, and checks the CA and control-plane settings as Istio's agent applies them: CA_ADDR picks the CA (discoveryAddress points
// elsewhere), ISTIOD_SAN is the name the CA's certificate is verified for, CA_HEADER_* and
// ISTIO_META_CLUSTER_ID arrive as gRPC metadata (XDS_HEADER_* and ClusterID on the xDS stream), ISTIO_META_CERT_SIGNER as the request's CertSigner
// metadata, SECRET_TTL is the validity asked for, OUTPUT_CERTS
// receives the files, 0644 when KUBERNETES_SERVICE_HOST is set (Istio's
// security.WorkloadKeyCertFileMode rule), and the SPIFFE ID is built from TRUST_DOMAIN,
// POD_NAMESPACE and SERVICE_ACCOUNT.
func TestCASettingsEndToEnd(t *testing.T) {
	ca, err := testca.New(testca.Config{Token: "token"})
	if err != nil {
		t.Fatal(err)
	}
	rootPEM, serving, err := testca.ServingPKI(time.Hour, testca.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	creds := grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{serving},
		MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert}))
	// The CA at CA_ADDR; at discoveryAddress an xDS server that records the stream's metadata.
	caSrv := grpc.NewServer(creds)
	ca.Register(caSrv)
	xdsMD := make(chan metadata.MD, 1)
	xdsSrv := grpc.NewServer(creds, grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		md, _ := metadata.FromIncomingContext(ss.Context())
		select {
		case xdsMD <- md:
		default:
		}
		<-ss.Context().Done()
		return nil
	}))
	caLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	xdsLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var servers sync.WaitGroup
	servers.Go(func() { _ = caSrv.Serve(caLis) })
	servers.Go(func() { _ = xdsSrv.Serve(xdsLis) })
	defer func() { caSrv.Stop(); xdsSrv.Stop(); servers.Wait() }()

	out := t.TempDir()
	p := newPod(t, "", "CA_ADDR="+caLis.Addr().String(), "ISTIOD_SAN="+testca.ServerName, "XDS_HEADER_x-wingman-xds=xds-header",
		"CA_HEADER_x-wingman-test=ca-header", "ISTIO_META_CLUSTER_ID=cluster-7", "SECRET_TTL=2h",
		"OUTPUT_CERTS="+out, "KUBERNETES_SERVICE_HOST=10.96.0.1", "TRUST_DOMAIN=example.org",
		"ISTIO_META_CERT_SIGNER=my-signer")
	p.env[0] = fmt.Sprintf(`PROXY_CONFIG={"binaryPath": %q, "proxyAdminPort": %d, "statusPort": %d, "discoveryAddress": %q, "terminationDrainDuration": "0.1s"}`,
		standinBin, p.admin, freePort(t), xdsLis.Addr().String())
	if err := os.WriteFile(filepath.Join(p.dir, istiodRootPath), rootPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	c, _, errb := p.cmd(t, "proxy", "sidecar")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = c.Process.Signal(syscall.SIGTERM)
		_ = c.Wait()
	}()

	chainPath := filepath.Join(out, "cert-chain.pem")
	deadline := time.Now().Add(30 * time.Second)
	var chain []byte
	for {
		if chain, err = os.ReadFile(chainPath); err == nil && len(chain) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no certificate in OUTPUT_CERTS; CA requests %d; agent stderr:\n%s", ca.Requests(), errb)
		}
		time.Sleep(20 * time.Millisecond)
	}
	block, _ := pem.Decode(chain)
	if block == nil {
		t.Fatalf("cert-chain.pem is not PEM: %q", chain)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if got := leaf.NotAfter.Sub(leaf.NotBefore); got != 2*time.Hour {
		t.Errorf("validity %v, want SECRET_TTL 2h", got)
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://example.org/ns/default/sa/default" {
		t.Errorf("identity %v", leaf.URIs)
	}
	md := ca.LastMetadata()
	if v := md.Get("x-wingman-test"); len(v) != 1 || v[0] != "ca-header" {
		t.Errorf("CA_HEADER metadata %v", md)
	}
	if v := md.Get("clusterid"); len(v) != 1 || v[0] != "cluster-7" {
		t.Errorf("ClusterID metadata %v", md)
	}
	// xDS: a stream on the agent's XDS socket opens the one upstream stream to discoveryAddress,
	// verified as ISTIOD_SAN, carrying XDS_HEADER_* and ClusterID.
	cc, err := grpc.NewClient("unix://"+filepath.Join(p.dir, "etc/istio/proxy/XDS"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&discovery.DeltaDiscoveryRequest{Node: &core.Node{Id: "sidecar~10.0.0.5~app-7d9.default~default.svc.cluster.local"},
		TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster"}); err != nil {
		t.Fatal(err)
	}
	select {
	case md := <-xdsMD:
		if v := md.Get("x-wingman-xds"); len(v) != 1 || v[0] != "xds-header" {
			t.Errorf("XDS_HEADER metadata on the xDS stream: %v", md)
		}
		if v := md.Get("clusterid"); len(v) != 1 || v[0] != "cluster-7" {
			t.Errorf("ClusterID metadata on the xDS stream: %v", md)
		}
	case <-sctx.Done():
		t.Fatalf("no xDS stream reached discoveryAddress; agent stderr:\n%s", errb)
	}

	if got := ca.LastRequestMetadata()["CertSigner"]; got != "my-signer" {
		t.Errorf("CertSigner in the request's metadata %q, want ISTIO_META_CERT_SIGNER's my-signer", got)
	}
	for _, f := range []string{"key.pem", "cert-chain.pem", "root-cert.pem"} {
		st, err := os.Stat(filepath.Join(out, f))
		if err != nil {
			t.Error(err)
		} else if st.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v; want 0644 with KUBERNETES_SERVICE_HOST", f, st.Mode().Perm())
		}
	}
}
