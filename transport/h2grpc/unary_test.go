package h2grpc

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestUnaryEcho: a unary call against grpc-go (TLS and plaintext) gets its response back, on one
// connection whatever the number of calls, messages of every size included.
func TestUnaryEcho(t *testing.T) {
	for _, useTLS := range []bool{true, false} {
		t.Run(strconv.FormatBool(useTLS), func(t *testing.T) {
			p := startGRPCPeer(t, useTLS)
			c := newTestClient(t, p, nil)
			for i, size := range []int{0, 1, 5000, 1 << 20} {
				want := pattern(size, i)
				got, err := c.Unary(testCtx(t), testMethod, want)
				if err != nil {
					t.Fatalf("%d bytes: %v", size, err)
				}
				bytesEqual(t, got, want)
			}
			if n := p.lis.accepts.Load(); n != 1 {
				t.Fatalf("%d connections, want 1", n)
			}
		})
	}
}

// TestUnaryStatus: the server's status reaches the caller with its code and message, whether it
// comes as a trailers-only response or after the response message.
func TestUnaryStatus(t *testing.T) {
	p := startGRPCPeer(t, false)
	for _, mode := range []string{"fail", "echo"} {
		c := newTestClient(t, p, map[string]string{"x-mode": mode, "x-code": strconv.Itoa(int(codes.PermissionDenied)), "x-msg": "odd"})
		_, err := c.Unary(testCtx(t), testMethod, []byte("csr"))
		if st := status.Convert(err); st.Code() != codes.PermissionDenied || st.Message() != oddMessage {
			t.Errorf("%s: %v, want PermissionDenied %q", mode, err, oddMessage)
		}
	}
}

// unaryPeer is a grpc-go server whose handler answers as the request metadata "x-answer" says:
// "none" ends OK without a message, "two" sends two messages, "deadline" sends back the
// handler's deadline as Unix nanoseconds ("none" without one), "wait" waits for the client to
// go away.
func unaryPeer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{}, 10)
	srv := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		defer func() { ended <- struct{}{} }()
		var in []byte
		if err := ss.RecvMsg(&in); err != nil {
			return err
		}
		md, _ := metadata.FromIncomingContext(ss.Context())
		switch md.Get("x-answer")[0] {
		case "two":
			for range 2 {
				if err := ss.SendMsg(&in); err != nil {
					return err
				}
			}
		case "deadline":
			out := []byte("none")
			if dl, ok := ss.Context().Deadline(); ok {
				out = strconv.AppendInt(nil, dl.UnixNano(), 10)
			}
			return ss.SendMsg(&out)
		case "wait":
			<-ss.Context().Done()
			return ss.Context().Err()
		}
		return nil
	}))
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return l.Addr().String()
}

// TestUnaryCardinality: no response message, or more than one, fails the call with Internal,
// as grpc-go's unary calls do.
func TestUnaryCardinality(t *testing.T) {
	addr := unaryPeer(t)
	for _, answer := range []string{"none", "two"} {
		c := newTestClientConfig(t, ClientConfig{Address: addr}, map[string]string{"x-answer": answer})
		if _, err := c.Unary(testCtx(t), testMethod, []byte("x")); status.Code(err) != codes.Internal {
			t.Errorf("%s: %v, want Internal", answer, err)
		}
	}
}

// TestUnaryDeadline: the context's deadline reaches the server as grpc-timeout (grpc-go's server
// sets its handler's deadline from it), none is sent without one, and a call the server does not
// answer in time ends with DeadlineExceeded.
func TestUnaryDeadline(t *testing.T) {
	addr := unaryPeer(t)
	c := newTestClientConfig(t, ClientConfig{Address: addr}, map[string]string{"x-answer": "deadline"})
	got, err := c.Unary(t.Context(), testMethod, nil)
	if err != nil || string(got) != "none" {
		t.Fatalf("without a deadline: %q, %v", got, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	want, _ := ctx.Deadline()
	got, err = c.Unary(ctx, testMethod, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := strconv.ParseInt(string(got), 10, 64)
	if err != nil {
		t.Fatalf("server answered %q", got)
	}
	// The server's deadline is its receipt time plus the timeout sent, rounded up: never before
	// the client's, and later only by the time the request took to arrive.
	if d := time.Unix(0, ns).Sub(want); d < -time.Microsecond || d > 10*time.Second {
		t.Fatalf("server's deadline is %v from the client's", d)
	}

	w := newTestClientConfig(t, ClientConfig{Address: addr}, map[string]string{"x-answer": "wait"})
	short, cancel2 := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel2()
	if _, err := w.Unary(short, testMethod, nil); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("unanswered call: %v, want DeadlineExceeded", err)
	}
}

// TestEncodeTimeout: every value fits gRPC's 8 digits, is never shorter than the duration, and
// is no more than one unit longer; the server side of this package reads it back.
func TestEncodeTimeout(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "1n"}, {0, "1n"}, {1, "1n"}, {99_999_999, "99999999n"}, {100 * time.Millisecond, "100000u"},
		{100*time.Millisecond + 1, "100001u"}, {time.Hour, "3600000m"}, {30 * 24 * time.Hour, "2592000S"},
		{1<<63 - 1, "2562048H"},
	} {
		got := encodeTimeout(tc.d)
		if got != tc.want {
			t.Errorf("%v: %q, want %q", tc.d, got, tc.want)
		}
		back, err := parseTimeout(got)
		if err != nil {
			t.Errorf("%q does not parse: %v", got, err)
		}
		if tc.d > 0 && back < tc.d {
			t.Errorf("%v sent as %q (%v): shorter", tc.d, got, back)
		}
	}
}

// TestConnect: Connect dials ahead, and the next call uses that connection; a server that is not
// there is Unavailable.
func TestConnect(t *testing.T) {
	p := startGRPCPeer(t, true)
	c := newTestClient(t, p, nil)
	if err := c.Connect(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if n := p.lis.accepts.Load(); n != 1 {
		t.Fatalf("%d connections after Connect, want 1", n)
	}
	if _, err := c.Unary(testCtx(t), testMethod, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if n := p.lis.accepts.Load(); n != 1 {
		t.Fatalf("%d connections after a call, want 1", n)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := l.Addr().String()
	l.Close()
	d := newTestClientConfig(t, ClientConfig{Address: gone}, nil)
	if err := d.Connect(testCtx(t)); status.Code(err) != codes.Unavailable {
		t.Fatalf("Connect to a closed port: %v, want Unavailable", err)
	}
}
