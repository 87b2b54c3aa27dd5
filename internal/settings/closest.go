package settings

// Closest returns the candidate nearest to name, if one is near enough to
// be the name meant (a letter or two off, or two letters swapped): for
// "did you mean" in the errors of unknown flags, variables and keys. It
// returns "" if none is.
func Closest(name string, candidates []string) string {
	best, bestD := "", 0
	for _, c := range candidates {
		if c == name {
			continue
		}
		d := distance(name, c)
		limit := min(3, max(1, min(len(name), len(c))/4))
		if d <= limit && (best == "" || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the optimal string alignment distance between a and b: the
// insertions, deletions, substitutions and swaps of adjacent bytes that
// make one the other.
func distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
