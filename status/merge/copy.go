package merge

import (
	"bytes"
	"errors"
	"io"
)

// errTooLarge reports a target body cut at the size bound.
var errTooLarge = errors.New("metrics body reached the size bound and was cut")

var (
	eofMarker = []byte("# EOF")
	newline   = []byte("\n")
)

// copyLines streams src to dst through buf, never holding more than len(buf) bytes, and only
// ever emits whole lines: an incomplete last line is held back and dropped if the body is cut
// (size bound, error or deadline), so a cut target cannot corrupt the lines after it. A body
// that ends cleanly without a final newline gets one. Lines longer than buf pass through in
// fragments. With openMetrics, the "# EOF" line and anything after it are dropped (the
// merged response re-adds one at its very end). At most limit bytes are read from src; reaching
// limit returns errTooLarge.
func copyLines(dst io.Writer, src io.Reader, limit int64, openMetrics bool, buf []byte) (written int64, err error) {
	var read int64
	pend := 0        // buf[:pend] is the incomplete current line (or a fragment of a long one)
	midLine := false // buf[0] continues a line whose start was already written
	write := func(p []byte) error {
		n, err := dst.Write(p)
		written += int64(n)
		return err
	}
	for {
		if read >= limit {
			if midLine {
				_ = write(newline) // end the over-long line already partly written
			}
			return written, errTooLarge
		}
		room := buf[pend:]
		if left := limit - read; int64(len(room)) > left {
			room = room[:left]
		}
		n, rerr := src.Read(room)
		read += int64(n)
		data := buf[:pend+n]
		if last := bytes.LastIndexByte(data, '\n'); last >= 0 {
			complete := data[:last+1]
			if openMetrics {
				if i := eofLine(complete, midLine); i >= 0 {
					return written, write(complete[:i])
				}
			}
			if err := write(complete); err != nil {
				return written, err
			}
			midLine = false
			pend = copy(buf, data[last+1:])
		} else {
			pend = len(data)
		}
		if pend == len(buf) {
			if err := write(buf[:pend]); err != nil {
				return written, err
			}
			pend, midLine = 0, true
		}
		switch {
		case rerr == io.EOF:
			if pend == 0 && !midLine {
				return written, nil
			}
			if openMetrics && !midLine && isEOFLine(buf[:pend]) {
				return written, nil
			}
			if err := write(buf[:pend]); err != nil {
				return written, err
			}
			return written, write(newline)
		case rerr != nil:
			if midLine {
				// The start of an over-long line is already out: end it so the next section
				// starts on a line of its own.
				_ = write(newline)
			}
			return written, rerr
		}
	}
}

// eofLine returns the offset of an OpenMetrics "# EOF" line inside complete (which ends in a
// newline), or -1. midLine tells that complete[0] continues a line rather than starting one.
func eofLine(complete []byte, midLine bool) int {
	for off := 0; ; {
		i := bytes.Index(complete[off:], eofMarker)
		if i < 0 {
			return -1
		}
		i += off
		start := (i == 0 && !midLine) || (i > 0 && complete[i-1] == '\n')
		if start && isEOFLine(bytes.TrimRight(lineAt(complete, i), "\n")) {
			return i
		}
		off = i + 1
	}
}

func lineAt(b []byte, i int) []byte {
	if j := bytes.IndexByte(b[i:], '\n'); j >= 0 {
		return b[i : i+j+1]
	}
	return b[i:]
}

func isEOFLine(line []byte) bool {
	return bytes.Equal(bytes.TrimSuffix(line, []byte("\r")), eofMarker)
}
