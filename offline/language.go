package offline

import (
	"strings"
	"unicode"
)

// scriptLang maps a script that (mostly) belongs to one language to that
// language's code. Scripts shared by many languages (Latin) are not here;
// Han and kana are handled apart, because Japanese writes with both.
var scriptLang = []struct {
	table *unicode.RangeTable
	code  string
}{
	{unicode.Devanagari, "hi"},
	{unicode.Arabic, "ar"},
	{unicode.Cyrillic, "ru"},
	{unicode.Hangul, "ko"},
	{unicode.Greek, "el"},
	{unicode.Hebrew, "he"},
	{unicode.Thai, "th"},
	{unicode.Bengali, "bn"},
	{unicode.Tamil, "ta"},
	{unicode.Telugu, "te"},
	{unicode.Gujarati, "gu"},
	{unicode.Gurmukhi, "pa"},
	{unicode.Georgian, "ka"},
	{unicode.Armenian, "hy"},
}

// stopwords holds, for each Latin-script language DetectLanguage knows, its
// most frequent short words (as they appear in support chats). A word may
// belong to several languages; the margin test in DetectLanguage resolves
// that. Elided French and Italian articles appear with their apostrophe.
var stopwords = map[string][]string{
	"en": strings.Fields(`the and is are you your to of my me i i'm it it's that this have has hasn't haven't
		don't doesn't didn't can't won't isn't for with not do does did what where when why how can could
		would will please be been on at yes hi hello thanks thank just still from but or if we they he she
		there here want need got any some about order arrived`),
	"es": strings.Fields(`el los las del y es está están un una por para con mi mis su pero hola gracias
		qué dónde cuándo cómo muy tengo pedido lo al todavía aún también yo usted ha hay sí esto este esta
		ya porque me se que de la no en llegado quiero puedo necesito`),
	"fr": strings.Fields(`le la les de des du et est un une je j' vous tu pour pas que qui dans avec mon
		ma mes ce cette sur bonjour merci où il elle nous suis au aux ne n' d' l' qu' c' s' commande
		toujours pourquoi comment bien mais ou très votre ai arrivée reçu`),
	"de": strings.Fields(`der die das und ist ich nicht ein eine einen mit zu den dem sie es auf für
		mein meine meinen wo noch hallo danke bitte wie sind habe hat kann können wir ihr aber oder auch
		schon keine kein bestellung heute sehr gibt bin angekommen`),
	"pt": strings.Fields(`o os as do da dos das e é um uma para com não meu minha em no na por olá oi
		obrigado obrigada você está onde ainda pedido mas se que de eu foi tem chegou muito também isso
		esse essa ao quero`),
	"it": strings.Fields(`il lo gli di che e è un una per con non mio mia miei del della dello in sono
		ciao grazie dove ancora ordine ma ho ha si anche questo questa perché come molto al alla nel
		nella l' un' sei io buongiorno arrivato`),
}

// latinLangs fixes the order in which Latin-script languages are scored,
// so that DetectLanguage never depends on map iteration order.
var latinLangs = []string{"en", "es", "fr", "de", "pt", "it"}

// stopwordLangs is stopwords inverted: word to the languages that use it.
var stopwordLangs = func() map[string][]string {
	m := make(map[string][]string)
	for _, lang := range latinLangs {
		for _, w := range stopwords[lang] {
			m[w] = append(m[w], lang)
		}
	}
	return m
}()

// DetectLanguage guesses the language of text and reports a BCP 47 language
// code ("en", "es", "hi", "zh", ...) with a confidence in (0, 1], or ok false
// when it is not confident. Non-Latin text is told by its script (Devanagari
// is taken as Hindi, Cyrillic as Russian unless it has Ukrainian letters,
// Arabic script as Arabic unless it has Persian or Urdu letters, Han with
// kana as Japanese, Han alone as Chinese). Latin text is told by counting
// the common words of English, Spanish, French, German, Portuguese and
// Italian. It needs at least three words (four characters for scripts
// written without spaces), one script for most of the letters and, for
// Latin text, at least two common words and twice as many as the runner-up.
func DetectLanguage(text string) (code string, confidence float64, ok bool) {
	var (
		letters, latin, han, kana int
		byScript                  = make([]int, len(scriptLang))
	)
	for _, r := range text {
		if !unicode.IsLetter(r) && !unicode.IsMark(r) {
			continue
		}
		letters++
		switch {
		case unicode.Is(unicode.Latin, r):
			latin++
		case unicode.Is(unicode.Han, r):
			han++
		case unicode.Is(unicode.Hiragana, r), unicode.Is(unicode.Katakana, r):
			kana++
		default:
			for i, s := range scriptLang {
				if unicode.Is(s.table, r) {
					byScript[i]++
					break
				}
			}
		}
	}
	if letters == 0 {
		return "", 0, false
	}
	words := wordsOf(text)
	// Chinese and Japanese are written without spaces between words.
	if cjk := han + kana; cjk*10 >= letters*6 {
		if cjk < 4 {
			return "", 0, false
		}
		code = "zh"
		if kana > 0 {
			code = "ja"
		}
		return code, scriptConfidence(cjk, letters), true
	}
	if latin*10 >= letters*6 {
		return detectLatin(words)
	}
	best := -1
	for i, n := range byScript {
		if n*10 >= letters*6 && (best < 0 || n > byScript[best]) {
			best = i
		}
	}
	if best < 0 {
		return "", 0, false
	}
	code = scriptLang[best].code
	if code == "th" {
		// Thai, too, is written without spaces between words.
		if byScript[best] < 4 {
			return "", 0, false
		}
	} else if len(words) < 3 {
		return "", 0, false
	}
	switch code {
	case "ru":
		if strings.ContainsAny(text, "іїєґІЇЄҐ") {
			code = "uk"
		}
	case "ar":
		switch {
		case strings.ContainsAny(text, "ٹڈڑںے"):
			code = "ur"
		case strings.ContainsAny(text, "پچژگکی"):
			code = "fa"
		}
	}
	return code, scriptConfidence(byScript[best], letters), true
}

// scriptConfidence is how sure a script-based guess is: high when nearly
// every letter is in the script, lower when a fair share is not.
func scriptConfidence(n, letters int) float64 {
	if n*10 >= letters*9 {
		return 0.9
	}
	return 0.75
}

// detectLatin scores Latin-script words against each language's stopwords.
func detectLatin(words []string) (string, float64, bool) {
	if len(words) < 3 {
		return "", 0, false
	}
	score := make(map[string]int, len(latinLangs))
	count := func(w string) {
		for _, lang := range stopwordLangs[w] {
			score[lang]++
		}
	}
	for _, w := range words {
		if _, known := stopwordLangs[w]; known {
			count(w)
			continue
		}
		// "n'est", "l'ordine": count the elided article and the word after it.
		if i := strings.IndexByte(w, '\''); i > 0 && i < len(w)-1 {
			count(w[:i+1])
			count(w[i+1:])
		}
	}
	best, second := "", 0
	for _, lang := range latinLangs {
		switch n := score[lang]; {
		case best == "" || n > score[best]:
			if best != "" {
				second = score[best]
			}
			best = lang
		case n > second:
			second = n
		}
	}
	top := score[best]
	if top < 2 || top < 2*second {
		return "", 0, false
	}
	conf := 0.5 + 0.4*float64(top-second)/float64(top)
	return best, float64(int(conf*100+0.5)) / 100, true
}

// wordsOf splits text into lowercase words of letters, marks and inner
// apostrophes (typographic apostrophes are folded to ASCII ones).
func wordsOf(text string) []string {
	fields := strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsMark(r) && r != '\'' && r != '’'
	})
	words := fields[:0]
	for _, f := range fields {
		f = strings.Trim(strings.ReplaceAll(f, "’", "'"), "'")
		if f != "" {
			words = append(words, strings.ToLower(f))
		}
	}
	return words
}
