package h2grpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/mem"
)

// fuzzSeeds are server byte streams (after the server's SETTINGS) for stream 1: a whole
// response, a trailers-only one, and some the client must refuse.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	frames := func(write func(fr *http2.Framer, hdr func(kv ...string) []byte)) []byte {
		var b, hb bytes.Buffer
		fr := http2.NewFramer(&b, nil)
		enc := hpack.NewEncoder(&hb)
		hdr := func(kv ...string) []byte {
			hb.Reset()
			for i := 0; i < len(kv); i += 2 {
				enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
			}
			return bytes.Clone(hb.Bytes())
		}
		write(fr, hdr)
		return b.Bytes()
	}
	seeds = append(seeds, frames(func(fr *http2.Framer, hdr func(...string) []byte) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: hdr(":status", "200", "content-type", "application/grpc")})
		fr.WriteData(1, false, []byte{0, 0, 0, 0, 3, 'a', 'b', 'c'})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true, BlockFragment: hdr("grpc-status", "0")})
	}))
	seeds = append(seeds, frames(func(fr *http2.Framer, hdr func(...string) []byte) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true, BlockFragment: hdr(":status", "200", "content-type", "application/grpc", "grpc-status", "5", "grpc-message", "x%20y")})
	}))
	seeds = append(seeds, frames(func(fr *http2.Framer, hdr func(...string) []byte) {
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 0})
		fr.WriteWindowUpdate(1, 1<<31-1)
		fr.WriteWindowUpdate(0, 1<<31-1)
		fr.WritePing(false, [8]byte{1})
		fr.WriteRSTStream(1, http2.ErrCodeRefusedStream)
		fr.WriteGoAway(0, http2.ErrCodeEnhanceYourCalm, []byte("bye"))
	}))
	seeds = append(seeds, frames(func(fr *http2.Framer, hdr func(...string) []byte) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: false, BlockFragment: hdr(":status", "200")})
		fr.WriteContinuation(1, true, hdr("content-type", "application/grpc"))
		fr.WriteDataPadded(1, true, []byte{0, 0, 0, 0, 9}, make([]byte, 20))
		fr.WriteData(3, false, []byte("idle"))
	}))
	return seeds
}

// FuzzClientFrames feeds the client a server's frames after a valid SETTINGS: it must end the
// stream with an error or a status, answer nothing with a panic, and never hang; what it sends
// (after its preface) must parse with x/net's Framer with only the RFC's error codes.
func FuzzClientFrames(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var settings bytes.Buffer
		http2.NewFramer(&settings, nil).WriteSettings()
		var once sync.Once
		var wg sync.WaitGroup
		replyErr := make(chan error, 1)
		defer func() {
			wg.Wait()
			select {
			case err := <-replyErr:
				t.Fatal(err)
			default:
			}
		}()
		c, err := NewClient(ClientConfig{Address: "fuzz:80", MaxRecvMsgBytes: 1 << 20, Dial: func(context.Context) (net.Conn, error) {
			var cl net.Conn
			once.Do(func() {
				var srv net.Conn
				cl, srv = net.Pipe()
				wg.Add(2)
				go func() { // the server reads everything the client sends, checking each frame
					defer wg.Done()
					if err := checkClientReplies(srv); err != nil {
						replyErr <- err
					}
					io.Copy(io.Discard, srv)
				}()
				go func() {
					defer wg.Done()
					srv.Write(settings.Bytes())
					srv.Write(in)
					srv.Close()
				}()
			})
			if cl == nil {
				return nil, errors.New("one connection per input")
			}
			return cl, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := c.Open(context.Background(), testMethod)
		if err != nil {
			return
		}
		defer s.Close()
		s.SendMsg(mem.BufferSlice{mem.SliceBuffer("request")})
		s.CloseSend()
		buf := make([]byte, 4096)
		for {
			if _, err := s.RecvMsgHeader(); err != nil {
				return
			}
			for {
				if _, err := s.Read(buf); err != nil {
					break
				}
			}
		}
	})
}

// checkClientReplies reads the client's preface, then checks its frames as checkReplies does.
func checkClientReplies(r io.Reader) error {
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(r, preface); err != nil {
		return nil // the connection ended first
	}
	if string(preface) != http2.ClientPreface {
		return fmt.Errorf("client preface %q", preface)
	}
	return checkReplies(r)
}
