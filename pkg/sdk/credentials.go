package sdk

import (
	"context"
	"iter"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// CredentialName is the name of credential id at the scope.
func (s Scope) CredentialName(id string) string { return s.child("credentials", id) }

// CreateCredential creates credential id at a scope; c holds its values,
// which no response returns.
func (c *Client) CreateCredential(ctx context.Context, s Scope, id string, cred *workloadv1.Credential) (*workloadv1.Credential, error) {
	return c.CredentialService.CreateCredential(ctx, &workloadv1.CreateCredentialRequest{Parent: s.Name(), CredentialId: id, Credential: cred})
}

// GetCredential reads credential id of a scope: its type, server and keys.
func (c *Client) GetCredential(ctx context.Context, s Scope, id string) (*workloadv1.Credential, error) {
	return c.CredentialService.GetCredential(ctx, &workloadv1.GetCredentialRequest{Name: s.CredentialName(id)})
}

// DeleteCredential removes credential id of a scope.
func (c *Client) DeleteCredential(ctx context.Context, s Scope, id string) error {
	_, err := c.CredentialService.DeleteCredential(ctx, &workloadv1.DeleteCredentialRequest{Name: s.CredentialName(id)})
	return err
}

// Credentials walks the credentials of a scope, by name.
func (c *Client) Credentials(ctx context.Context, s Scope) iter.Seq2[*workloadv1.Credential, error] {
	return All(ctx, func(ctx context.Context, token string) (Page[*workloadv1.Credential], error) {
		r, err := c.CredentialService.ListCredentials(ctx, &workloadv1.ListCredentialsRequest{Parent: s.Name(), PageToken: token, PageSize: 1000})
		return Page[*workloadv1.Credential]{Items: r.GetCredentials(), Next: r.GetNextPageToken()}, err
	})
}

// ReencryptCredentials seals every credential again under the newest
// platform key.
func (c *Client) ReencryptCredentials(ctx context.Context) (*workloadv1.ReencryptCredentialsResponse, error) {
	return c.CredentialService.ReencryptCredentials(ctx, &workloadv1.ReencryptCredentialsRequest{})
}
