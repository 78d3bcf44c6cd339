package grpcserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// The client's address, as the audit log records it. A gRPC call's is its
// connection's peer. A REST call reaches gRPC over the gateway's loopback
// connection, so the gateway passes on the address it saw, tagged with a
// secret of this server (restPeerKey): a client cannot make up its own,
// neither over gRPC nor through the gateway. X-Forwarded-For is believed
// only hop by hop from the right while the hop is a configured proxy
// (Config.TrustedProxies): the first address that is not one is the client.

const restPeerKey = "x-runway-rest-peer"

func newGatewaySecret() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// gatewayPeer is the metadata the gateway adds to each REST call.
func (s *Server) gatewayPeer(_ context.Context, r *http.Request) metadata.MD {
	return metadata.Pairs(restPeerKey, s.gatewaySecret+" "+r.RemoteAddr+" "+r.Header.Get("X-Forwarded-For"))
}

// peerAddress is the client's address for the call in ctx.
func (s *Server) peerAddress(ctx context.Context) string {
	addr, fwd := "", ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get(restPeerKey) {
		if rest, ok := strings.CutPrefix(v, s.gatewaySecret+" "); ok {
			addr, fwd, _ = strings.Cut(rest, " ")
			break
		}
	}
	if fwd == "" {
		fwd = strings.Join(md.Get("x-forwarded-for"), ",")
	}
	return s.throughProxies(addr, fwd)
}

// throughProxies walks X-Forwarded-For from the right past trusted proxies.
func (s *Server) throughProxies(addr, forwarded string) string {
	hops := strings.Split(forwarded, ",")
	for i := len(hops); s.trusted(addr) && i > 0; i-- {
		hop := strings.TrimSpace(hops[i-1])
		if hop == "" {
			break
		}
		addr = hop
	}
	return addr
}

func (s *Server) trusted(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}

// PeerAddress is the client's address of the call ctx belongs to ("" outside
// a call served by this package).
func PeerAddress(ctx context.Context) string {
	if c, ok := ctx.Value(callKey{}).(*call); ok {
		return c.peer
	}
	return ""
}
