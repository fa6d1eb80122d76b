package bootstrap

// appendJSON methods of the gRPC bootstrap types (grpc.go), written as encoding/json writes them
// (see envoy_json.go; jsonw_test.go compares the two).

func (b *GRPCBootstrap) appendJSON(w *jsonWriter) {
	if b == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("xds_servers")
	appendSlice(w, b.XDSServers)
	w.field("node")
	b.Node.appendJSON(w)
	if len(b.CertificateProviders) > 0 {
		w.field("certificate_providers")
		w.beginObject()
		for _, k := range sortedMapKeys(b.CertificateProviders) {
			w.key(k)
			p := b.CertificateProviders[k]
			p.appendJSON(w)
		}
		w.endObject()
	}
	w.strField("server_listener_resource_name_template", b.ServerListenerResourceNameTemplate, true)
	w.endObject()
}

func (s *GRPCXDSServer) appendJSON(w *jsonWriter) {
	if s == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("server_uri", s.ServerURI, false)
	w.field("channel_creds")
	appendSlice(w, s.ChannelCreds)
	w.field("server_features")
	w.strings(s.ServerFeatures)
	w.endObject()
}

func (c *GRPCChannelCreds) appendJSON(w *jsonWriter) {
	if c == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("type", c.Type, false)
	w.endObject()
}

func (n *GRPCNode) appendJSON(w *jsonWriter) {
	if n == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("id", n.ID, false)
	if n.Locality != nil {
		w.field("locality")
		n.Locality.appendJSON(w)
	}
	if len(n.Metadata) > 0 {
		w.field("metadata")
		w.raw(n.Metadata)
	}
	w.endObject()
}

func (p *GRPCCertProvider) appendJSON(w *jsonWriter) {
	if p == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("plugin_name", p.PluginName, false)
	w.field("config")
	p.Config.appendJSON(w)
	w.endObject()
}

func (f *FileWatcherConfig) appendJSON(w *jsonWriter) {
	if f == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("certificate_file", f.CertificateFile, false)
	w.strField("private_key_file", f.PrivateKeyFile, false)
	w.strField("ca_certificate_file", f.CACertificateFile, false)
	w.strField("refresh_interval", f.RefreshInterval, false)
	w.endObject()
}
