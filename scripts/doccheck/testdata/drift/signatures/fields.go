package signatures

// fastPairs bounds the bodies read by braintreeFormFast. A pattern such
// as -?(0|[1-9][0-9]*)([eE][+-]?[0-9]+)? names nothing.
const fastPairs = 16

func fields() int { return fastPairs }
