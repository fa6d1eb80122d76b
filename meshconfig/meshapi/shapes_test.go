package meshapi

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
)

// TestShapesMatchIstio walks istio.io/api's ProxyConfig and ours side by side: every exported
// field has the same name, struct tags and type shape (our types standing for istio.io/api's
// by the same Go name, everything else the very same type), every exported method of istio's
// (getters, String, MarshalJSON, ...) exists on ours with the same shape, oneof members wrap in
// types of the same name, and every enum value prints the same name. This is what keeps a
// bootstrap template written for Istio's .config working on ours.
func TestShapesMatchIstio(t *testing.T) {
	c := &shapeCheck{t: t, done: map[reflect.Type]bool{}}
	c.pair(reflect.TypeOf(&meshv1alpha1.ProxyConfig{}), reflect.TypeOf(&ProxyConfig{}), "ProxyConfig")
	if len(c.done) < 40 {
		t.Fatalf("only %d types compared", len(c.done))
	}
}

type shapeCheck struct {
	t    *testing.T
	done map[reflect.Type]bool
}

func isIstio(t reflect.Type) bool { return strings.HasPrefix(t.PkgPath(), "istio.io/api/") }

// pair checks that ours has the shape of theirs.
func (c *shapeCheck) pair(theirs, ours reflect.Type, where string) {
	if theirs.Kind() != ours.Kind() {
		c.t.Errorf("%s: kind %s, Istio's %s", where, ours.Kind(), theirs.Kind())
		return
	}
	if !isIstio(theirs) && theirs.Name() != "" {
		if theirs != ours {
			c.t.Errorf("%s: type %s, Istio's %s", where, ours, theirs)
		}
		return
	}
	if theirs.Name() != ours.Name() {
		c.t.Errorf("%s: type named %s, Istio's %s", where, ours.Name(), theirs.Name())
	}
	switch theirs.Kind() {
	case reflect.Pointer, reflect.Slice:
		c.pair(theirs.Elem(), ours.Elem(), where+"[]")
		if theirs.Kind() == reflect.Pointer && theirs.Elem().Kind() == reflect.Struct {
			c.methods(theirs, ours, where)
		}
		return
	case reflect.Map:
		c.pair(theirs.Key(), ours.Key(), where+" key")
		c.pair(theirs.Elem(), ours.Elem(), where+" value")
		return
	case reflect.Int32:
		c.enum(theirs, ours, where)
		c.methods(theirs, ours, where)
		return
	case reflect.Struct:
	default:
		return
	}
	if c.done[theirs] {
		return
	}
	c.done[theirs] = true
	var theirFields []reflect.StructField
	for i := range theirs.NumField() {
		if f := theirs.Field(i); f.IsExported() {
			theirFields = append(theirFields, f)
		}
	}
	if len(theirFields) != ours.NumField() {
		c.t.Errorf("%s: %d fields, Istio's has %d", where, ours.NumField(), len(theirFields))
		return
	}
	for i, tf := range theirFields {
		of := ours.Field(i)
		w := where + "." + tf.Name
		if tf.Name != of.Name || tf.Tag != of.Tag {
			c.t.Errorf("%s: field %s `%s`, Istio's %s `%s`", w, of.Name, of.Tag, tf.Name, tf.Tag)
			continue
		}
		if tf.Type.Kind() == reflect.Interface {
			c.oneof(theirs, ours, tf, of, w)
			continue
		}
		c.pair(tf.Type, of.Type, w)
	}
}

// oneof checks the wrapper of every member: Istio's is found by setting the member on a fresh
// message through protoreflect and looking at what the interface field holds.
func (c *shapeCheck) oneof(theirs, ours reflect.Type, tf, of reflect.StructField, where string) {
	if of.Type.Kind() != reflect.Interface {
		c.t.Errorf("%s: not an interface", where)
		return
	}
	msg := reflect.New(theirs).Interface().(proto.Message).ProtoReflect()
	od := msg.Descriptor().Oneofs().ByName(protoreflect.Name(tf.Tag.Get("protobuf_oneof")))
	wrappers := reflect.New(ours).Interface().(oneofHolder).oneofWrappers()
	if od == nil || od.Fields().Len() != len(wrappers) {
		c.t.Errorf("%s: %d members, Istio's oneof %v", where, len(wrappers), od)
		return
	}
	for i := range od.Fields().Len() {
		fd := od.Fields().Get(i)
		m := msg.New()
		m.Set(fd, m.NewField(fd))
		theirW := reflect.ValueOf(m.Interface()).Elem().FieldByName(tf.Name).Elem().Type()
		ourW := reflect.TypeOf(wrappers[i])
		if !ourW.Implements(of.Type) {
			c.t.Errorf("%s: %s does not implement %s", where, ourW, of.Type)
		}
		if theirW.Elem().Field(0).Tag != ourW.Elem().Field(0).Tag {
			c.t.Errorf("%s: wrapper tag `%s`, Istio's `%s`", where, ourW.Elem().Field(0).Tag, theirW.Elem().Field(0).Tag)
		}
		c.pair(theirW, ourW, where+"("+theirW.Elem().Name()+")")
	}
}

// methods checks that every exported method of Istio's type that a template could call exists
// on ours with the same shape. protoc-gen-go's proto plumbing (ProtoReflect, Descriptor,
// EnumDescriptor, Type, Number, ProtoMessage, Reset) is not carried over: our types are not
// proto.Messages.
func (c *shapeCheck) methods(theirs, ours reflect.Type, where string) {
	skip := map[string]bool{"ProtoReflect": true, "Descriptor": true, "EnumDescriptor": true,
		"Type": true, "Number": true, "ProtoMessage": true, "Reset": true}
	for i := range theirs.NumMethod() {
		tm := theirs.Method(i)
		if skip[tm.Name] {
			continue
		}
		om, ok := ours.MethodByName(tm.Name)
		if !ok {
			c.t.Errorf("%s: no method %s", where, tm.Name)
			continue
		}
		if tm.Type.NumIn() != om.Type.NumIn() || tm.Type.NumOut() != om.Type.NumOut() {
			c.t.Errorf("%s.%s: signature %s, Istio's %s", where, tm.Name, om.Type, tm.Type)
			continue
		}
		for j := 1; j < tm.Type.NumIn(); j++ {
			c.pairShallow(tm.Type.In(j), om.Type.In(j), fmt.Sprintf("%s.%s in %d", where, tm.Name, j))
		}
		for j := range tm.Type.NumOut() {
			c.pairShallow(tm.Type.Out(j), om.Type.Out(j), fmt.Sprintf("%s.%s out %d", where, tm.Name, j))
		}
	}
}

// pairShallow compares types by shape and name without walking struct fields (pair does that).
func (c *shapeCheck) pairShallow(theirs, ours reflect.Type, where string) {
	if theirs.Kind() != ours.Kind() || theirs.Name() != ours.Name() {
		c.t.Errorf("%s: %s, Istio's %s", where, ours, theirs)
		return
	}
	switch theirs.Kind() {
	case reflect.Pointer, reflect.Slice:
		c.pairShallow(theirs.Elem(), ours.Elem(), where)
		return
	case reflect.Map:
		c.pairShallow(theirs.Key(), ours.Key(), where)
		c.pairShallow(theirs.Elem(), ours.Elem(), where)
		return
	}
	if theirs.Name() != "" && !isIstio(theirs) && theirs != ours {
		c.t.Errorf("%s: %s, Istio's %s", where, ours, theirs)
	}
}

// enum checks that every value of Istio's enum, and one it does not define, prints the same.
func (c *shapeCheck) enum(theirs, ours reflect.Type, where string) {
	e, ok := reflect.Zero(theirs).Interface().(protoreflect.Enum)
	if !ok {
		return
	}
	vals := e.Descriptor().Values()
	nums := []int64{999}
	for i := range vals.Len() {
		nums = append(nums, int64(vals.Get(i).Number()))
	}
	for _, n := range nums {
		tv := reflect.New(theirs).Elem()
		tv.SetInt(n)
		ov := reflect.New(ours).Elem()
		ov.SetInt(n)
		if a, b := fmt.Sprint(tv.Interface()), fmt.Sprint(ov.Interface()); a != b {
			c.t.Errorf("%s(%d) prints %q, Istio's %q", where, n, b, a)
		}
	}
}
