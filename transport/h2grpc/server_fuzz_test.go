package h2grpc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// FuzzServerFrames sends arbitrary bytes after the client preface to a real server on a Unix
// socket, half-closes, and reads until the server closes: whatever the frames, the server must
// neither panic (a panic in its goroutines ends the process) nor hang (the read has a deadline),
// its replies must parse with x/net's Framer with only the RFC's error codes (checkReplies),
// and it must keep serving other connections; goleak (main_test.go) checks its goroutines.
func FuzzServerFrames(f *testing.F) {
	for _, seed := range serverFuzzSeeds(f) {
		f.Add(seed)
	}
	_, path := startServer(f, ServerConfig{MaxRecvMsgBytes: 1 << 16, StreamWindow: 64 << 10, ConnWindow: 64 << 10, MaxConcurrentStreams: 4}, map[string]Handler{testMethod: echoHandler})
	f.Fuzz(func(t *testing.T, frames []byte) {
		nc, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		go func() {
			// The server may close first; a failed write is fine.
			nc.Write(append([]byte(http2.ClientPreface), frames...))
			nc.(*net.UnixConn).CloseWrite()
		}()
		err = checkReplies(nc)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("the server did not end the connection after the client's end")
		}
		if err != nil {
			t.Fatal(err)
		}
	})
}

// checkReplies reads a peer's frames until the connection ends and checks each against x/net's
// Framer (RFC 9113's frame rules: lengths, flags, stream ids, padding, header blocks): every
// frame must parse, and RST_STREAM and GOAWAY carry only the RFC's error codes (section 7).
// The reader allows what fuzzed SETTINGS may have raised: any frame size, any table size.
func checkReplies(r io.Reader) error {
	fr := http2.NewFramer(nil, r)
	fr.SetMaxReadFrameSize(1<<24 - 1)
	dec := hpack.NewDecoder(4096, nil)
	dec.SetAllowedMaxDynamicTableSize(math.MaxUint32)
	fr.ReadMetaHeaders = dec
	for {
		f, err := fr.ReadFrame()
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.ErrClosedPipe), errors.Is(err, net.ErrClosed), errors.Is(err, syscall.ECONNRESET):
			// The end; a frame cut short by the close of a connection failed on a protocol error.
			return nil
		case err != nil:
			var ce http2.ConnectionError
			var se http2.StreamError
			if errors.As(err, &ce) || errors.As(err, &se) {
				return fmt.Errorf("reply does not parse with x/net's Framer: %v (%v)", err, fr.ErrorDetail())
			}
			return err
		}
		var code http2.ErrCode
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			code = f.ErrCode
		case *http2.GoAwayFrame:
			code = f.ErrCode
		case *http2.PushPromiseFrame:
			return fmt.Errorf("PUSH_PROMISE from a server that pushes nothing")
		}
		if code > http2.ErrCodeHTTP11Required {
			return fmt.Errorf("%v with error code %v, not one of RFC 9113 section 7", f.Header().Type, code)
		}
	}
}

// serverFuzzSeeds are well-formed conversations: a stream with a message and END_STREAM, its
// trailers form, PING, WINDOW_UPDATE, SETTINGS, a reset.
func serverFuzzSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	build := func(write func(fr *http2.Framer, hdr func(id uint32, end bool))) {
		var buf, hbuf bytes.Buffer
		fr := http2.NewFramer(&buf, nil)
		enc := hpack.NewEncoder(&hbuf)
		hdr := func(id uint32, end bool) {
			hbuf.Reset()
			for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", testMethod}, {":authority", "a"}, {"content-type", "application/grpc"}, {"te", "trailers"}, {"grpc-timeout", "1S"}} {
				enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
			}
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndStream: end, EndHeaders: true})
		}
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 16})
		write(fr, hdr)
		seeds = append(seeds, buf.Bytes())
	}
	msg := prefixed(0, 3, []byte("abc"))
	build(func(fr *http2.Framer, hdr func(uint32, bool)) {
		hdr(1, false)
		fr.WriteData(1, true, msg)
	})
	build(func(fr *http2.Framer, hdr func(uint32, bool)) {
		hdr(1, false)
		fr.WriteData(1, false, msg[:4])
		fr.WriteDataPadded(1, false, msg[4:], []byte{0, 0})
		fr.WriteWindowUpdate(0, 100)
		fr.WriteWindowUpdate(1, 100)
		fr.WritePing(false, [8]byte{1})
		hdr(1, true) // trailers
	})
	build(func(fr *http2.Framer, hdr func(uint32, bool)) {
		hdr(1, false)
		hdr(3, true)
		fr.WriteRSTStream(1, http2.ErrCodeCancel)
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20}, http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
		fr.WritePriority(3, http2.PriorityParam{StreamDep: 1, Weight: 5})
		fr.WriteGoAway(0, http2.ErrCodeNo, nil)
	})
	return seeds
}
