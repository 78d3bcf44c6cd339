package sdk

import (
	"context"
	"iter"
)

// Page is one page of a List call: its items and the token of the next
// page ("" on the last).
type Page[T any] struct {
	Items []T
	Next  string
}

// All walks every page of a List call, calling list with each page token
// until the last page. The iteration stops at the first error, which it
// yields with a zero item.
func All[T any](ctx context.Context, list func(ctx context.Context, pageToken string) (Page[T], error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		token := ""
		for {
			p, err := list(ctx, token)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range p.Items {
				if !yield(it, nil) {
					return
				}
			}
			if p.Next == "" {
				return
			}
			token = p.Next
		}
	}
}

// Collect gathers an iterator into a slice, stopping at the first error.
func Collect[T any](seq iter.Seq2[T, error]) ([]T, error) {
	var out []T
	for it, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, it)
	}
	return out, nil
}
