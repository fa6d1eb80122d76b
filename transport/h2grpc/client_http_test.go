package h2grpc

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// discardLogger keeps the test servers' expected protocol errors out of the test log.
var discardLogger = log.New(io.Discard, "", 0)

// startHTTPServer serves h with net/http on loopback TCP: h2c when tc is nil, else TLS with
// the given protocols. It stops at cleanup.
func startHTTPServer(t *testing.T, h http.HandlerFunc, tc *tls.Config, protos *http.Protocols) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, Protocols: protos, TLSConfig: tc, ErrorLog: discardLogger}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if tc != nil {
			srv.ServeTLS(l, "", "")
		} else {
			srv.Serve(l)
		}
	}()
	t.Cleanup(func() {
		srv.Close()
		wg.Wait()
	})
	return l.Addr().String()
}

// TestClientNonGRPCResponse: an HTTP error from something that is not a gRPC server maps to
// a code as grpc-go maps it (HTTPStatusConvTab), with grpc-go's message.
func TestClientNonGRPCResponse(t *testing.T) {
	for httpStatus, want := range map[int]codes.Code{
		http.StatusNotFound:           codes.Unimplemented,
		http.StatusServiceUnavailable: codes.Unavailable,
		http.StatusUnauthorized:       codes.Unauthenticated,
		http.StatusTeapot:             codes.Unknown,
		http.StatusOK:                 codes.Unknown, // 200 but text/plain
	} {
		protos := new(http.Protocols)
		protos.SetUnencryptedHTTP2(true)
		addr := startHTTPServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(httpStatus)
			w.Write([]byte("not gRPC"))
		}, nil, protos)
		c := newTestClientConfig(t, ClientConfig{Address: addr}, nil)
		s, err := c.Open(testCtx(t), testMethod)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.RecvMsgHeader()
		s.Close()
		if status.Code(err) != want {
			t.Errorf("HTTP %d: %v, want %v", httpStatus, err, want)
		}
	}
}

// TestClientRefusesHTTP1: a TLS server that does not negotiate h2 is refused (Unavailable),
// never spoken to in HTTP/1.1.
func TestClientRefusesHTTP1(t *testing.T) {
	cert, pool := selfSigned(t)
	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	var hit atomic.Bool
	addr := startHTTPServer(t, func(w http.ResponseWriter, r *http.Request) {
		hit.Store(true)
	}, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}, protos)
	c := newTestClientConfig(t, ClientConfig{Address: addr, TLS: &tls.Config{RootCAs: pool, ServerName: "localhost"}}, nil)
	s, err := c.Open(testCtx(t), testMethod)
	if err == nil {
		_, err = s.RecvMsgHeader()
		s.Close()
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("HTTP/1.1-only server: %v, want Unavailable", err)
	}
	t.Logf("HTTP/1.1-only server: %v", err)
	c.Close()
	if hit.Load() {
		t.Fatal("a request reached the HTTP/1.1 server")
	}
}

// TestClientRefusesTLSWithoutALPN: a TLS server that negotiates no protocol at all is not
// spoken to in HTTP/1.1 either.
func TestClientRefusesTLSWithoutALPN(t *testing.T) {
	cert, pool := selfSigned(t)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	got := make(chan []byte, 1)
	go func() {
		defer wg.Done()
		conn, err := l.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer conn.Close()
		buf := make([]byte, 64)
		n, _ := conn.Read(buf)
		got <- buf[:n]
	}()
	defer func() {
		l.Close()
		wg.Wait()
	}()
	c := newTestClientConfig(t, ClientConfig{Address: l.Addr().String(), TLS: &tls.Config{RootCAs: pool, ServerName: "localhost"}}, nil)
	s, err := c.Open(testCtx(t), testMethod)
	if err == nil {
		_, err = s.RecvMsgHeader()
		s.Close()
	}
	t.Logf("server without ALPN: %v", err)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("server without ALPN: %v, want Unavailable", err)
	}
	c.Close()
	if b := <-got; len(b) > 0 && string(b[:4]) == "POST" {
		t.Fatalf("spoke HTTP/1.1: %q", b)
	}
}
