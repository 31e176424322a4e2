package suggest

// Closest returns the candidate nearest to word by edit distance, or ""
// when none is near enough to be a plausible typo: a wild guess is worse
// than no hint.
func Closest(word string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		d := distance(word, c)
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	limit := 1 + len([]rune(word))/3
	if bestD < 0 || bestD > limit || bestD >= len([]rune(best)) {
		return ""
	}
	return best
}

// Hint is Closest phrased for an error message: ", did you mean `x`?" or "".
func Hint(word string, candidates []string) string {
	if c := Closest(word, candidates); c != "" {
		return ", did you mean `" + c + "`?"
	}
	return ""
}

// distance is the Levenshtein distance with adjacent transpositions
// counted as one edit, the commonest typo.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
