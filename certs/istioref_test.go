package certs

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	pb "istio.io/api/security/v1alpha1"

	"github.com/wingman-mesh/wingman/fastpath"
	"github.com/wingman-mesh/wingman/lab/testca"
)

// istioRef is a same-run reference for the rotation path: an SDS server that does, from the CA's
// answer to the stream's Send, the work Istio's agent does there. Established from istio/istio's
// source (security/pkg/nodeagent/caclient/providers/citadel/client.go CSRSign,
// security/pkg/nodeagent/cache/secretcache.go GenerateSecret/generateNewSecret/registerSecret,
// security/pkg/nodeagent/sds/sdsservice.go generate/Push/toEnvoySecret, pkg/xds Stream/Send):
//
//   - the CA is called on the SDS stream's own goroutine (a rotation reaches each stream as a
//     push event; Push → generate → GenerateSecret → CSRSign), so no goroutine hand-off lies
//     between the answer and the Send;
//   - the answer is refused only when it has fewer than two elements; the chain is the elements
//     concatenated (a newline added where one is missing), the leaf alone is parsed for its
//     expiry, the root is the last element as received; no signature, SAN or key is checked;
//   - an Info log line, the secret cached under a mutex and its rotation scheduled, the root
//     compared with the previous one;
//   - the Secret is built as generated go-control-plane types, marshalled into an Any, put in a
//     DiscoveryResponse (version: RFC 3339 time + "/" + counter; nonce: a random UUID) and sent
//     through the generated SDS stream (gRPC's proto codec marshals it again).
//
// Everything here is our own code written from that description; nothing is copied.
type istioRef struct {
	secretv3.UnimplementedSecretDiscoveryServiceServer
	ca    pb.IstioCertificateServiceClient
	csr   string
	key   []byte          // PEM of the key the CSR was made with
	push  chan struct{}   // a rotation's push event, as Istio's per-connection push channel
	log   *slog.Logger    // Info lines formatted and discarded
	recvs sync.WaitGroup  // receive goroutines; waited after the server stops
	ver   atomic.Uint64   // response versions
	mu    sync.Mutex      // guards cache, root, timer
	cache *refSecret      // the workload secret, as Istio's secretCache
	root  []byte          // the last root seen
	timer *time.Timer     // the scheduled rotation (never fires in a benchmark)
	ctx   context.Context // the CA calls' context
	md    metadata.MD     // ClusterID, as the citadel client sends
	token credentials.PerRPCCredentials
}

// refSecret is what Istio's agent caches and serves for "default".
type refSecret struct {
	chain, key, root []byte
	created, expires time.Time
}

type bearer string

func (t bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}
func (bearer) RequireTransportSecurity() bool { return true }

// startIstioRef serves the reference on a Unix socket in e.dir, signing through e's CA over TLS
// with its own client connection, and returns an SDS client connected to it: dial's, when not nil.
func startIstioRef(e *env, dial func(path string) *sdsClient) (*istioRef, *sdsClient) {
	t := e.t
	t.Helper()
	k, err := generateKey(&Config{KeyType: KeyECDSA, ECCCurve: "P256"})
	if err != nil {
		t.Fatal(err)
	}
	csr, err := createCSR(k.signer, e.m.spiffeID)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(e.ca.ServingRootPEM())
	caConn, err := grpc.NewClient(e.m.cfg.CAAddr,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: testca.ServerName})),
		grpc.WithPerRPCCredentials(bearer("secret-token")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { caConn.Close() })
	r := &istioRef{ca: pb.NewIstioCertificateServiceClient(caConn), csr: string(csr), key: k.pem,
		push: make(chan struct{}), log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ctx: e.ctx, md: metadata.Pairs("ClusterID", "Kubernetes")}
	path := filepath.Join(e.dir, "ref.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	secretv3.RegisterSecretDiscoveryServiceServer(srv, r)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		<-done
		r.recvs.Wait()
		r.mu.Lock()
		if r.timer != nil {
			r.timer.Stop()
		}
		r.mu.Unlock()
		os.Remove(path)
	})
	if dial != nil {
		return r, dial(path)
	}
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	stream, err := secretv3.NewSecretDiscoveryServiceClient(conn).StreamSecrets(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r, &sdsClient{t: t, conn: conn, stream: stream}
}

// StreamSecrets is the shape of Istio's pkg/xds Stream: a receive goroutine, and one loop that
// answers requests and push events, each on this goroutine.
func (r *istioRef) StreamSecrets(stream secretv3.SecretDiscoveryService_StreamSecretsServer) error {
	reqs := make(chan *discovery.DiscoveryRequest, 1)
	errc := make(chan error, 1)
	r.recvs.Add(1)
	go func() {
		defer r.recvs.Done()
		for {
			req, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case reqs <- req:
			case <-stream.Context().Done():
				return
			}
		}
	}()
	var names []string
	for {
		select {
		case <-stream.Context().Done():
			return stream.Context().Err()
		case err := <-errc:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case req := <-reqs:
			if req.GetResponseNonce() != "" {
				continue // an ACK of the last response, or of an older one (stale): no answer
			}
			names = req.GetResourceNames()
		case <-r.push:
			if !slices.Contains(names, ResourceDefault) {
				continue // Istio's Push: nothing for a stream that did not ask for the secret
			}
		}
		if err := r.generateAndSend(stream, names); err != nil {
			return err
		}
	}
}

// generateAndSend signs a CSR and sends the resulting "default" secret (the only name the
// benchmark asks for), doing Istio's work between the answer and the Send.
func (r *istioRef) generateAndSend(stream secretv3.SecretDiscoveryService_StreamSecretsServer, names []string) error {
	if len(names) != 1 || names[0] != ResourceDefault {
		return fmt.Errorf("istioRef serves only %q, not %v", ResourceDefault, names)
	}
	t0 := time.Now()
	resp, err := r.ca.CreateCertificate(metadata.NewOutgoingContext(r.ctx, r.md),
		&pb.IstioCertificateRequest{Csr: r.csr, ValidityDuration: 86400})
	if err != nil {
		return err
	}
	elems := resp.GetCertChain()
	if len(elems) <= 1 {
		return errors.New("invalid empty CertChain")
	}
	var chain bytes.Buffer
	for i, c := range elems {
		chain.WriteString(c)
		if i < len(elems)-1 && !strings.HasSuffix(c, "\n") {
			chain.WriteByte('\n')
		}
	}
	block, _ := pem.Decode(chain.Bytes())
	if block == nil {
		return errors.New("no PEM block in the chain")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return err
	}
	r.log.Info("generated new workload certificate", "resourceName", ResourceDefault,
		"latency", time.Since(t0), "ttl", time.Until(leaf.NotAfter))
	sec := &refSecret{chain: chain.Bytes(), key: r.key, root: []byte(elems[len(elems)-1]),
		created: time.Now(), expires: leaf.NotAfter}
	delay := time.Until(sec.expires.Add(-time.Duration(0.5 * float64(sec.expires.Sub(sec.created)))))
	r.mu.Lock()
	r.cache = sec
	if r.timer == nil {
		r.timer = time.AfterFunc(delay, func() {})
	} else {
		r.timer.Reset(delay)
	}
	if !bytes.Equal(r.root, sec.root) {
		r.root = sec.root
	}
	r.mu.Unlock()
	secret := &tlsv3.Secret{Name: ResourceDefault, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: sec.chain}},
		PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: sec.key}},
	}}}
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(secret)
	if err != nil {
		return err
	}
	res := &discovery.Resource{Name: ResourceDefault, Resource: &anypb.Any{TypeUrl: fastpath.SecretType, Value: body}}
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6], u[8] = u[6]&0x0f|0x40, u[8]&0x3f|0x80
	h := hex.EncodeToString(u[:])
	out := &discovery.DiscoveryResponse{
		TypeUrl:     fastpath.SecretType,
		VersionInfo: time.Now().Format(time.RFC3339) + "/" + strconv.FormatUint(r.ver.Add(1), 10),
		Nonce:       h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:],
		Resources:   []*anypb.Any{res.GetResource()},
	}
	return stream.Send(out)
}

// TestIstioRefServesAValidSecret: the reference's pushes carry a usable pair, so the benchmark
// compares like with like.
func TestIstioRefServesAValidSecret(t *testing.T) {
	e := newEnv(t, nil)
	r, c := startIstioRef(e, nil)
	c.send("", ResourceDefault)
	first, err := checkPair(c.mustRecv(ResourceDefault)[ResourceDefault], e.clock.Now(), e.ca.RootPEM())
	if err != nil {
		t.Fatal(err)
	}
	r.push <- struct{}{}
	second, err := checkPair(c.mustRecv(ResourceDefault)[ResourceDefault], e.clock.Now(), e.ca.RootPEM())
	if err != nil {
		t.Fatal(err)
	}
	if first.SerialNumber.Cmp(second.SerialNumber) == 0 {
		t.Fatal("the push carried the same certificate")
	}
}
