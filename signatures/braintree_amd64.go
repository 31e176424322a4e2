package signatures

// braintreeAlnumBlocks returns the length of the longest prefix of s made of whole 16-byte
// blocks of ASCII letters, digits and "/" (braintree_amd64.s).
//
//go:noescape
func braintreeAlnumBlocks(s []byte) int
