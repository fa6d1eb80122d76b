package h2grpc

import (
	"bufio"
	"net"
)

// readBufferSize is the read buffer under the client's HTTP/2 connection. net/http's HTTP/2
// client reads through a 4 KiB buffer, which a DATA frame's payload bypasses: two read system
// calls per 16 KiB frame, the largest CPU cost of a large push in the profile. Reading through
// 64 KiB takes four frames or more per call when they are waiting.
const readBufferSize = 64 << 10

// readBufferedConn is a connection whose reads go through a buffer.
type readBufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func newReadBufferedConn(c net.Conn) *readBufferedConn {
	return &readBufferedConn{Conn: c, r: bufio.NewReaderSize(c, readBufferSize)}
}

func (c *readBufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
