package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/runwayhq/runway/pkg/apierr"
)

// Page tokens leave the server sealed: the store's token (a key, a
// revision) encrypted and authenticated (AES-256-GCM) with a key derived
// from the current signing key, bound to the caller, the method and the
// query (the request without its page token and page size). A caller learns
// nothing from a token, and one token is good only for the next page of the
// same query by the same caller; every replica opens it (the signing keys
// are shared through etcd) until its key retires.

var errPageToken = errors.New("page token not issued for this request")

// pageFields are a List method's page_token and its response's
// next_page_token; ok is false when the method has none.
func pageFields(req, resp proto.Message) (in, out protoreflect.FieldDescriptor, ok bool) {
	in = req.ProtoReflect().Descriptor().Fields().ByName("page_token")
	if resp != nil {
		out = resp.ProtoReflect().Descriptor().Fields().ByName("next_page_token")
	}
	return in, out, in != nil && in.Kind() == protoreflect.StringKind
}

// pageBinding is what a token is bound to.
func pageBinding(c Caller, method string, req proto.Message, in protoreflect.FieldDescriptor) []byte {
	q := proto.Clone(req)
	q.ProtoReflect().Clear(in)
	if ps := q.ProtoReflect().Descriptor().Fields().ByName("page_size"); ps != nil {
		q.ProtoReflect().Clear(ps)
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(q)
	h := sha256.New()
	for _, part := range [][]byte{[]byte(c.Principal), []byte(method), b} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

func (g *Guard) pageAEAD(kid string) (cipher.AEAD, bool) {
	secret, ok := g.keys.secret(kid)
	if !ok {
		return nil, false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("runway page token"))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		return nil, false
	}
	aead, err := cipher.NewGCM(block)
	return aead, err == nil
}

// sealPage turns the store's token into the one the caller gets.
func (g *Guard) sealPage(inner string, binding []byte) (string, error) {
	key, ok := g.keys.signer()
	if !ok {
		return "", errors.New("no signing key")
	}
	aead, ok := g.pageAEAD(key.GetId())
	if !ok {
		return "", errors.New("page token key")
	}
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	sealed := aead.Seal(nonce, nonce, []byte(inner), binding)
	return key.GetId() + "." + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// openPage is sealPage's inverse; errPageToken for a token not sealed for
// binding.
func (g *Guard) openPage(token string, binding []byte) (string, error) {
	kid, body, ok := strings.Cut(token, ".")
	if !ok {
		return "", errPageToken
	}
	aead, ok := g.pageAEAD(kid)
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if !ok || err != nil || len(raw) < aead.NonceSize() {
		return "", errPageToken
	}
	inner, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], binding)
	if err != nil {
		return "", errPageToken
	}
	return string(inner), nil
}

// pageIn replaces a request's sealed page token with the store's; it
// returns the binding for pageOut.
func (g *Guard) pageIn(c Caller, method string, req any) ([]byte, error) {
	m, ok := req.(proto.Message)
	if !ok {
		return nil, nil
	}
	in, _, ok := pageFields(m, nil)
	if !ok {
		return nil, nil
	}
	binding := pageBinding(c, method, m, in)
	if tok := m.ProtoReflect().Get(in).String(); tok != "" {
		inner, err := g.openPage(tok, binding)
		if err != nil {
			return nil, apierr.InvalidPageToken()
		}
		m.ProtoReflect().Set(in, protoreflect.ValueOfString(inner))
	}
	return binding, nil
}

// pageOut seals a response's next page token.
func (g *Guard) pageOut(resp any, binding []byte) error {
	m, ok := resp.(proto.Message)
	if !ok || binding == nil || m == nil || !m.ProtoReflect().IsValid() {
		return nil
	}
	out := m.ProtoReflect().Descriptor().Fields().ByName("next_page_token")
	if out == nil {
		return nil
	}
	if inner := m.ProtoReflect().Get(out).String(); inner != "" {
		tok, err := g.sealPage(inner, binding)
		if err != nil {
			return err
		}
		m.ProtoReflect().Set(out, protoreflect.ValueOfString(tok))
	}
	return nil
}
