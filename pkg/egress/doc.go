// Package egress decides which addresses Runway's control plane connects
// to on a tenant's behalf (notification webhooks and SMTP servers), so that
// a subscription cannot make the server reach its own loopback services,
// the cluster's private network or a cloud metadata endpoint.
//
// A host is checked twice: when a URL is accepted (CheckHost: every address
// it resolves to must be allowed) and at every connection (Dial): the name
// is resolved again and the address actually dialled is checked in a
// net.Dialer Control function, so a name that resolved to a public address
// at the first check and to 127.0.0.1 at the second (DNS rebinding) is
// refused.
package egress
