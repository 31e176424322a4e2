//go:build !amd64

package signatures

// braintreeAlnumBlocks returns the length of the longest prefix of s made of whole 16-byte
// blocks of ASCII letters, digits and "/".
func braintreeAlnumBlocks(s []byte) int { return braintreeAlnumBlocksWords(s) }
