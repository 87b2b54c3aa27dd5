package offline

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A transcript that stamps its messages with the date they were written
// ("[1:56 pm on 8 May, 2023] Hi!", as exported chats and the LoCoMo data
// do) gives the summary its timeline: the stamp becomes a heading line
// ("[8 May 2023]") printed above the kept sentences of that day, and a
// relative date in them ("yesterday", "last Friday", "last year") gets the
// day it stands for, since the summary is read long after "today" has
// moved on.

// dayStamp is the day a heading stands for.
type dayStamp struct {
	t  time.Time
	ok bool
}

const headingLayout = "2 January 2006"

var (
	monthPattern = `(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?`
	reDayMonth   = regexp.MustCompile(`(?i)\b(\d{1,2})(?:st|nd|rd|th)?\s+` + monthPattern + `,?\s+(\d{4})\b`)
	reMonthDay   = regexp.MustCompile(`(?i)\b` + monthPattern + `\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b`)
	reISODate    = regexp.MustCompile(`\b(\d{4})-(\d{2})-(\d{2})\b`)
	monthIndex   = map[string]time.Month{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}
)

// dateHeading reads a date stamp at the start of text ("[1:56 pm on 8 May,
// 2023] ...", "[2023-05-08]") and returns the heading it makes ("[8 May
// 2023]") with its day. ok is false when text does not start with a
// bracketed stamp holding a whole date.
func dateHeading(text string) (heading string, d dayStamp, ok bool) {
	t := strings.TrimLeft(text, " \t")
	if !strings.HasPrefix(t, "[") {
		return "", dayStamp{}, false
	}
	end := strings.IndexByte(t, ']')
	if end < 0 || end > 64 {
		return "", dayStamp{}, false
	}
	day, ok := parseDay(t[1:end])
	if !ok {
		return "", dayStamp{}, false
	}
	return "[" + day.Format(headingLayout) + "]", dayStamp{t: day, ok: true}, true
}

// parseDay finds a whole date (day, month and year) in s.
func parseDay(s string) (time.Time, bool) {
	var y, mo, d string
	if m := reDayMonth.FindStringSubmatch(s); m != nil {
		d, mo, y = m[1], m[2], m[3]
	} else if m := reMonthDay.FindStringSubmatch(s); m != nil {
		mo, d, y = m[1], m[2], m[3]
	} else if m := reISODate.FindStringSubmatch(s); m != nil {
		y, d = m[1], m[3]
		n, _ := strconv.Atoi(m[2])
		if n < 1 || n > 12 {
			return time.Time{}, false
		}
		mo = strings.ToLower(time.Month(n).String()[:3])
	} else {
		return time.Time{}, false
	}
	year, _ := strconv.Atoi(y)
	day, _ := strconv.Atoi(d)
	month := monthIndex[strings.ToLower(mo)]
	t := time.Date(year, month, day, 0, 0, 0, 0, time.UTC)
	if month == 0 || t.Day() != day || t.Month() != month {
		return time.Time{}, false // 31 April and the like
	}
	return t, true
}

// reRelative matches the relative dates resolveDates resolves.
var reRelative = regexp.MustCompile(`(?i)\b(?:yesterday|tomorrow|(?:last|next) (?:year|month)|last week(?:end)?|` +
	`last (?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)(?:day|nesday|sday|urday|rsday)?|` +
	`(\d+|a|one|two|three|four|five|six|seven|eight|nine|ten) (days?|weeks?|months?|years?) ago)\b`)

// reFigurative matches, right before a relative date, the words that make
// it a figure of speech ("it feels like yesterday").
var reFigurative = regexp.MustCompile(`(?i)\b(?:like|as if|as though)\s+$`)

var smallNumbers = map[string]int{"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
	"seven": 7, "eight": 8, "nine": 9, "ten": 10}

var weekdays = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday,
	"wed": time.Wednesday, "thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

// resolveDates adds, after each relative date in s, the day (or month, or
// year) it stands for as seen from day: "yesterday (7 May 2023)", "last
// year (2022)", "last week (the week before 8 May 2023)". One already followed by a parenthesis is left as it is, so
// that a summary read again is not annotated twice.
func resolveDates(s string, day dayStamp) string {
	locs := reRelative.FindAllStringSubmatchIndex(s, -1)
	if len(locs) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, loc := range locs {
		end := loc[1]
		if strings.HasPrefix(s[end:], " (") || reFigurative.MatchString(s[:loc[0]]) {
			continue // already resolved, or "feels like yesterday"
		}
		expr := strings.ToLower(s[loc[0]:end])
		var note string
		t := day.t
		switch {
		case expr == "yesterday":
			note = t.AddDate(0, 0, -1).Format(headingLayout)
		case expr == "tomorrow":
			note = t.AddDate(0, 0, 1).Format(headingLayout)
		case expr == "last year":
			note = strconv.Itoa(t.Year() - 1)
		case expr == "next year":
			note = strconv.Itoa(t.Year() + 1)
		case expr == "last month":
			note = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -1, 0).Format("January 2006")
		case expr == "next month":
			note = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, 1, 0).Format("January 2006")
		case expr == "last week" || expr == "last weekend":
			// No one day: the span, as seen from the heading's.
			note = "the " + expr[5:] + " before " + t.Format(headingLayout)
		case strings.HasPrefix(expr, "last "):
			wd, ok := weekdays[expr[5:8]]
			if !ok {
				continue
			}
			back := (int(t.Weekday())-int(wd)+6)%7 + 1 // 1..7 days before
			note = t.AddDate(0, 0, -back).Format(headingLayout)
		case loc[2] >= 0:
			n, err := strconv.Atoi(s[loc[2]:loc[3]])
			if err != nil {
				n = smallNumbers[strings.ToLower(s[loc[2]:loc[3]])]
			}
			if n < 1 || n > 100 {
				continue
			}
			switch unit := strings.ToLower(s[loc[4]:loc[5]]); {
			case strings.HasPrefix(unit, "year"):
				note = strconv.Itoa(t.Year() - n)
			case strings.HasPrefix(unit, "month"):
				note = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -n, 0).Format("January 2006")
			case strings.HasPrefix(unit, "week"):
				note = strings.ToLower(s[loc[0]:loc[4]]) + unit + " before " + t.Format(headingLayout)
			default:
				note = t.AddDate(0, 0, -n).Format(headingLayout)
			}
		default:
			continue
		}
		b.WriteString(s[last:end])
		b.WriteString(" (" + note + ")")
		last = end
	}
	b.WriteString(s[last:])
	return b.String()
}
