package bootstrap

// appendJSON methods of the static clusters (see envoy_json.go for the rules they follow).

func (s *StaticResources) appendJSON(w *jsonWriter) {
	if s == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("clusters")
	appendSlice(w, s.Clusters)
	if len(s.Listeners) > 0 {
		w.field("listeners")
		appendSlice(w, s.Listeners)
	}
	w.endObject()
}

func (c *Cluster) appendJSON(w *jsonWriter) {
	if c == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("name", c.Name, false)
	w.strField("alt_stat_name", c.AltStatName, true)
	w.strField("type", c.Type, false)
	w.strField("connect_timeout", c.ConnectTimeout, false)
	w.strField("lb_policy", c.LbPolicy, true)
	w.boolField("respect_dns_ttl", c.RespectDNSTTL, true)
	w.strField("dns_lookup_family", c.DNSLookupFamily, true)
	w.strField("dns_refresh_rate", c.DNSRefreshRate, true)
	if c.TransportSocket != nil {
		w.field("transport_socket")
		c.TransportSocket.appendJSON(w)
	}
	if len(c.TypedExtensionProtocolOptions) > 0 {
		w.field("typed_extension_protocol_options")
		w.mapAny(c.TypedExtensionProtocolOptions)
	}
	if c.CircuitBreakers != nil {
		w.field("circuit_breakers")
		c.CircuitBreakers.appendJSON(w)
	}
	if c.UpstreamConnectionOptions != nil {
		w.field("upstream_connection_options")
		c.UpstreamConnectionOptions.appendJSON(w)
	}
	w.uintField("max_requests_per_connection", c.MaxRequestsPerConnection, true)
	if c.LoadAssignment != nil {
		w.field("load_assignment")
		c.LoadAssignment.appendJSON(w)
	}
	if c.EdsClusterConfig != nil {
		w.field("eds_cluster_config")
		c.EdsClusterConfig.appendJSON(w)
	}
	w.endObject()
}

func (e *EdsClusterConfig) appendJSON(w *jsonWriter) {
	if e == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("eds_config")
	e.EdsConfig.appendJSON(w)
	w.strField("service_name", e.ServiceName, true)
	w.endObject()
}

func (c *CircuitBreakers) appendJSON(w *jsonWriter) {
	if c == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("thresholds")
	appendSlice(w, c.Thresholds)
	w.endObject()
}

func (t *Thresholds) appendJSON(w *jsonWriter) {
	if t == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("priority", t.Priority, false)
	w.uintField("max_connections", t.MaxConnections, false)
	w.uintField("max_pending_requests", t.MaxPendingRequests, false)
	w.uintField("max_requests", t.MaxRequests, false)
	w.endObject()
}

func (u *UpstreamConnOpts) appendJSON(w *jsonWriter) {
	if u == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("tcp_keepalive")
	u.TCPKeepalive.appendJSON(w)
	w.endObject()
}

func (t *TCPKeepalive) appendJSON(w *jsonWriter) {
	if t == nil {
		w.null()
		return
	}
	w.beginObject()
	w.uintField("keepalive_probes", t.KeepaliveProbes, true)
	w.uintField("keepalive_time", t.KeepaliveTime, true)
	w.uintField("keepalive_interval", t.KeepaliveInterval, true)
	w.endObject()
}

func (c *ClusterLoadAssign) appendJSON(w *jsonWriter) {
	if c == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("cluster_name", c.ClusterName, false)
	w.field("endpoints")
	appendSlice(w, c.Endpoints)
	w.endObject()
}

func (l *LocalityEndpoint) appendJSON(w *jsonWriter) {
	if l == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("lb_endpoints")
	appendSlice(w, l.LbEndpoints)
	w.endObject()
}

func (l *LbEndpoint) appendJSON(w *jsonWriter) {
	if l == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("endpoint")
	l.Endpoint.appendJSON(w)
	w.endObject()
}

func (e *Endpoint) appendJSON(w *jsonWriter) {
	if e == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("address")
	e.Address.appendJSON(w)
	w.endObject()
}
