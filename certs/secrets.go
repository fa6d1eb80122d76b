package certs

// Resource names Envoy asks for, as Istio's agent serves them.
const (
	ResourceDefault  = "default"
	ResourceRootCA   = "ROOTCA"
	fileCertPrefix   = "file-cert:"
	fileRootPrefix   = "file-root:"
	fileRootSystem   = "file-root:system"
	fileCertSplitter = "~"
)
