package h2grpc

import (
	"io"
	"log"
)

// discardLogger swallows net/http's server log lines (client protocol errors).
var discardLogger = log.New(io.Discard, "", 0)
