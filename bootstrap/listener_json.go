package bootstrap

// appendJSON methods of the static listeners and their HTTP connection manager (see
// envoy_json.go for the rules they follow).

func (l *Listener) appendJSON(w *jsonWriter) {
	if l == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("name", l.Name, false)
	w.field("address")
	l.Address.appendJSON(w)
	if len(l.AdditionalAddresses) > 0 {
		w.field("additional_addresses")
		appendSlice(w, l.AdditionalAddresses)
	}
	if len(l.ListenerFilters) > 0 {
		w.field("listener_filters")
		appendSlice(w, l.ListenerFilters)
	}
	w.field("filter_chains")
	appendSlice(w, l.FilterChains)
	w.boolField("ignore_global_conn_limit", l.IgnoreGlobalConnLimit, true)
	w.boolField("bypass_overload_manager", l.BypassOverloadManager, true)
	w.endObject()
}

func (a *AdditionalAddress) appendJSON(w *jsonWriter) {
	if a == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("address")
	a.Address.appendJSON(w)
	w.endObject()
}

func (f *FilterChain) appendJSON(w *jsonWriter) {
	if f == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("filters")
	appendSlice(w, f.Filters)
	if f.TransportSocket != nil {
		w.field("transport_socket")
		f.TransportSocket.appendJSON(w)
	}
	w.endObject()
}

func (h *HTTPConnectionManager) appendJSON(w *jsonWriter) {
	if h == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("@type", h.Type, false)
	w.strField("codec_type", h.CodecType, false)
	w.strField("stat_prefix", h.StatPrefix, false)
	w.field("route_config")
	h.RouteConfig.appendJSON(w)
	w.field("http_filters")
	appendSlice(w, h.HTTPFilters)
	w.endObject()
}

func (r *RouteConfig) appendJSON(w *jsonWriter) {
	if r == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("virtual_hosts")
	appendSlice(w, r.VirtualHosts)
	w.endObject()
}

func (v *VirtualHost) appendJSON(w *jsonWriter) {
	if v == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("name", v.Name, false)
	w.field("domains")
	w.strings(v.Domains)
	w.field("routes")
	appendSlice(w, v.Routes)
	w.endObject()
}

func (r *Route) appendJSON(w *jsonWriter) {
	if r == nil {
		w.null()
		return
	}
	w.beginObject()
	w.field("match")
	r.Match.appendJSON(w)
	w.field("route")
	r.Route.appendJSON(w)
	w.endObject()
}

func (r *RouteMatch) appendJSON(w *jsonWriter) {
	if r == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("prefix", r.Prefix, false)
	w.endObject()
}

func (r *RouteAction) appendJSON(w *jsonWriter) {
	if r == nil {
		w.null()
		return
	}
	w.beginObject()
	w.strField("cluster", r.Cluster, false)
	w.endObject()
}
