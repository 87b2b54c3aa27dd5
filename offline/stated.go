package offline

import (
	"regexp"
	"strings"
	"unicode"
)

// Confidences of the rules for what users state about their preferences,
// addresses, money, dates and travel.
const (
	confLanguage = 0.9
	confAddress  = 0.85
	confDiet     = 0.85
	confChannel  = 0.8
	confSize     = 0.8
	confAmount   = 0.75
	confDate     = 0.7
	confFlight   = 0.9
	confTicket   = 0.85
)

// languageNames maps a language's name, in English and in the languages
// DetectLanguage knows, to its BCP 47 code.
var languageNames = func() map[string]string {
	m := make(map[string]string)
	for code, names := range map[string]string{
		"en": "english inglés ingles anglais englisch inglês inglese",
		"es": "spanish español espanol espagnol spanisch espanhol spagnolo castellano",
		"fr": "french francés frances français francais französisch francês francese",
		"de": "german alemán aleman allemand deutsch alemão tedesco",
		"pt": "portuguese portugués portugues portugais portugiesisch português portoghese",
		"it": "italian italiano italien italienisch",
		"hi": "hindi",
		"ta": "tamil",
		"te": "telugu",
		"kn": "kannada",
		"ml": "malayalam",
		"bn": "bengali bangla",
		"mr": "marathi",
		"gu": "gujarati",
		"pa": "punjabi",
		"ur": "urdu",
		"ar": "arabic árabe arabe arabisch",
		"zh": "chinese mandarin chino chinois chinesisch chinês cinese",
		"ja": "japanese japonés japonais japanisch japonês giapponese",
		"ko": "korean coreano coréen koreanisch",
		"ru": "russian ruso russe russisch russo",
		"nl": "dutch holandés néerlandais niederländisch holandês olandese",
		"pl": "polish polaco polonais polnisch polacco",
		"tr": "turkish turco turc türkisch",
		"uk": "ukrainian ucraniano ukrainien ukrainisch",
		"vi": "vietnamese",
		"th": "thai",
		"id": "indonesian",
		"el": "greek griego grec griechisch",
		"he": "hebrew",
		"sv": "swedish sueco suédois schwedisch",
	} {
		for _, n := range strings.Fields(names) {
			m[n] = code
		}
	}
	return m
}()

// langName matches a language's name (checked against languageNames).
const langName = `(?P<value>\p{L}{4,14})`

// checkLanguage turns a language's name into its code.
func checkLanguage(v string) (string, bool) {
	code, ok := languageNames[strings.ToLower(v)]
	return code, ok
}

// checkAddress cuts an address at the end of its sentence or at what
// follows it ("..., not my home", "... please") and keeps it only if it
// has a number (a house number or a postal code) and a word.
func checkAddress(v string) (string, bool) {
	lower := strings.ToLower(v)
	cut := len(v)
	for _, stop := range []string{", not ", " not ", " instead", ", please", " please", " thanks", " thank you",
		" from now on", " rather than", ";", " por favor", " s'il", " svp", " bitte", " per favore", " and not ", " y no ", " et non ",
		" but ", " because ", " as ", " since "} {
		if i := strings.Index(lower, stop); i >= 0 && i < cut {
			cut = i
		}
	}
	for i := 0; i < cut; i++ {
		if v[i] != '.' && v[i] != '!' && v[i] != '?' {
			continue
		}
		if i+1 < len(v) && v[i+1] != ' ' && v[i+1] != '\n' {
			continue // "No.5", a decimal
		}
		// An abbreviation ("St.", "Rd.", "Apt.", "No.") ends no sentence.
		w := i
		for w > 0 && unicode.IsLetter(rune(v[w-1])) {
			w--
		}
		if v[i] == '.' && addressAbbrevs[strings.ToLower(v[w:i])] && i+1 < len(v) {
			continue
		}
		cut = i
		break
	}
	v = strings.TrimRight(strings.TrimSpace(v[:cut]), ",.;:!?- ")
	for _, when := range []string{" last week", " last month", " yesterday", " today", " tomorrow", " next week", " recently"} {
		v = strings.TrimSuffix(v, when)
	}
	digit, letters := false, 0
	for _, r := range v {
		switch {
		case unicode.IsDigit(r):
			digit = true
		case unicode.IsLetter(r):
			letters++
		}
	}
	if !digit || letters < 3 || len(v) < 6 {
		return "", false
	}
	return v, true
}

// addressAbbrevs are the abbreviations an address may hold with a period
// that does not end it.
var addressAbbrevs = map[string]bool{"st": true, "rd": true, "ave": true, "av": true, "apt": true, "no": true, "nr": true,
	"blvd": true, "ln": true, "dr": true, "fl": true, "flr": true, "bldg": true, "str": true, "c": true, "p": true}

// dietWords maps a diet as users name it to the value stored.
var dietWords = map[string]string{
	"vegetarian": "vegetarian", "vegetariano": "vegetarian", "vegetariana": "vegetarian", "végétarien": "vegetarian",
	"végétarienne": "vegetarian", "vegetarier": "vegetarian", "vegetarierin": "vegetarian", "vegetarisch": "vegetarian",
	"vegan": "vegan", "vegano": "vegan", "vegana": "vegan", "végétalien": "vegan", "végétalienne": "vegan", "végane": "vegan",
	"veganer": "vegan", "veganerin": "vegan", "pescatarian": "pescatarian", "pescetarian": "pescatarian",
	"gluten-free": "gluten-free", "gluten free": "gluten-free", "celiac": "gluten-free", "coeliac": "gluten-free",
	"celíaco": "gluten-free", "celíaca": "gluten-free", "cœliaque": "gluten-free", "zöliakie": "gluten-free",
	"halal": "halal", "kosher": "kosher", "jain": "jain", "eggetarian": "eggetarian", "keto": "keto",
	"lactose intolerant": "lactose-free", "lactose-intolerant": "lactose-free", "lactose-free": "lactose-free",
	"dairy-free": "dairy-free", "dairy free": "dairy-free",
}

func checkDiet(v string) (string, bool) {
	d, ok := dietWords[strings.ToLower(v)]
	return d, ok
}

// checkAllergy drops a leading article ("los cacahuetes": "cacahuetes").
func checkAllergy(v string) (string, bool) {
	if f := strings.Fields(v); len(f) > 1 {
		switch strings.ToLower(f[0]) {
		case "los", "las", "el", "la", "les", "le", "die", "den", "der", "i", "gli", "os", "as", "o", "a", "the":
			v = strings.Join(f[1:], " ")
		}
	}
	return v, true
}

// checkNoFood turns "I don't eat pork" into "no pork".
func checkNoFood(v string) (string, bool) {
	return "no " + strings.ToLower(v), true
}

// channelWords maps a way to be reached, as users name it, to the value
// stored.
var channelWords = map[string]string{
	"email": "email", "e-mail": "email", "mail": "email", "correo": "email", "courriel": "email", "emails": "email",
	"phone": "phone", "call": "phone", "calls": "phone", "telephone": "phone", "teléfono": "phone", "téléphone": "phone",
	"telefon": "phone", "telefone": "phone", "telefono": "phone", "llamada": "phone", "anruf": "phone", "mobile": "phone",
	"sms": "sms", "text": "sms", "texts": "sms", "text message": "sms", "text messages": "sms",
	"whatsapp": "whatsapp", "telegram": "telegram", "signal": "signal",
}

func checkChannel(v string) (string, bool) {
	c, ok := channelWords[strings.ToLower(v)]
	return c, ok
}

// checkUpper upper-cases a value and drops its spaces ("ai 302": "AI302").
func checkUpper(v string) (string, bool) {
	return strings.ToUpper(strings.ReplaceAll(v, " ", "")), true
}

// checkFlight keeps a flight number whose airline code has a letter.
func checkFlight(v string) (string, bool) {
	v, _ = checkUpper(v)
	if len(v) < 3 || !(unicode.IsLetter(rune(v[0])) || unicode.IsLetter(rune(v[1]))) {
		return "", false
	}
	return v, true
}

const (
	channel = `(?i)(?P<value>e-?mails?|mail|phone|calls?|telephone|sms|text(?:\s+messages?|s)?|whats\s?app|telegram|signal|` +
		`correo|teléfono|llamada|courriel|téléphone|telefon|anruf|telefone|telefono)\b`
	monthNames = `(?:january|february|march|april|may|june|july|august|september|october|november|december|` +
		`jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\.?`
	meses = `(?:enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|setiembre|octubre|noviembre|diciembre|` +
		`janeiro|fevereiro|março|abril|maio|junho|julho|agosto|setembro|outubro|novembro|dezembro|` +
		`janvier|février|mars|avril|mai|juin|juillet|août|septembre|octobre|novembre|décembre|` +
		`januar|februar|märz|april|mai|juni|juli|august|september|oktober|november|dezember|` +
		`gennaio|febbraio|marzo|aprile|maggio|giugno|luglio|agosto|settembre|ottobre|novembre|dicembre)`
	money     = `\d{1,3}(?:[,.\x{00a0} ]\d{3})+(?:[.,]\d{1,2})?|\d+(?:[.,]\d{1,2})?`
	currencyA = `(?:US\$|R\$|[$€£₹¥]|\b(?:Rs\.?|INR|USD|EUR|GBP|JPY|AUD|CAD|CHF|SGD|AED))\s?`
	currencyB = `(?:\s?(?:USD|EUR|GBP|INR|JPY|AUD|CAD|CHF|SGD|AED|dollars?|euros?|pounds?|rupees?|reais|yen|francs?|dólares|dollari|rupias)\b|\s?[€£$])`
)

// statedRules are the rules for what users say about their preferences,
// addresses, money, dates and travel (see DefaultRules).
func statedRules() []Rule {
	return []Rule{
		// The language asked for.
		{
			Key: "language", Confidence: confLanguage, Check: checkLanguage,
			Pattern: regexp.MustCompile(`(?i:\b(?:answer|reply|respond|write|talk|speak|chat|communicate|continue|switch|` +
				`(?:be\s+)?answered|(?:be\s+)?served|help\s+me)(?:\s+(?:back\s+)?(?:to\s+)?(?:me|us))?(?:\s+only)?(?:\s+back)?\s+(?:in|to|into)\s+)` + langName),
		},
		{
			Key: "language", Confidence: confLanguage, Check: checkLanguage,
			Pattern: regexp.MustCompile(`(?i:\b(?:can|could|shall)\s+(?:we|you)\s+(?:please\s+)?(?:speak|talk|use|chat\s+in|continue\s+in)|\blet['’]?s\s+(?:speak|talk|use|continue\s+in|switch\s+to)|` +
				`\bplease\s+(?:use|speak)|\bi(?:\s+would|['’]d)\s+prefer|\bi\s+prefer)\s+` + langName),
		},
		{
			Key: "language", Confidence: confLanguage, Check: checkLanguage,
			Pattern: regexp.MustCompile(`(?i:\b(?:en|em|auf|in)\s+)` + langName + `(?i:\s*,?\s*(?:por\s+favor|s['’]il\s+(?:vous|te)\s+pla[iî]t|svp|bitte|per\s+favore|please|pls))`),
		},
		{
			Key: "language", Confidence: confLanguage, Check: checkLanguage,
			Pattern: regexp.MustCompile(`(?i:\b(?:respóndeme|respondeme|contéstame|contestame|háblame|hablame|escríbeme|escribeme|responda(?:me)?|` +
				`podemos\s+hablar|prefiero|répondez(?:-moi)?|réponds(?:-moi)?|parlez(?:-moi)?|pouvons-nous\s+parler|on\s+peut\s+parler|je\s+préf[eè]re|` +
				`antworte(?:n\s+sie)?(?:\s+mir)?|sprechen\s+sie(?:\s+bitte)?(?:\s+mit\s+mir)?|schreiben\s+sie(?:\s+mir)?|` +
				`responda|fale(?:\s+comigo)?|podemos\s+falar|prefiro|rispondi(?:mi)?|rispondete(?:mi)?|parla(?:mi)?|possiamo\s+parlare|preferisco)` +
				`(?:\s+(?:bitte|por\s+favor|per\s+favore))?\s+(?:en\s+|em\s+|auf\s+|in\s+)?)` + langName),
		},
		{
			Key: "language", Confidence: confLanguage, Check: checkLanguage,
			Pattern: regexp.MustCompile(`(?i:\bkönnen\s+wir\s+(?:bitte\s+)?(?:auf\s+)?)` + langName + `(?i:\s+(?:sprechen|reden|schreiben))`),
		},

		// Addresses.
		{
			Key: "address", Confidence: confAddress, Check: checkAddress, NotInQuestion: true,
			Pattern: regexp.MustCompile(`(?i:\b(?:my\s+(?:new\s+|current\s+|home\s+|delivery\s+|shipping\s+|billing\s+|office\s+|work\s+|correct\s+)?address\s+(?:is|will\s+be|has\s+changed\s+to)(?:\s+now)?|` +
				`(?:deliver|ship|send|bring)\s+(?:it\s+|them\s+|everything\s+|the\s+(?:order|package|parcel)\s+|my\s+(?:order|package|parcel)\s+)?(?:instead\s+)?to` +
				`(?:\s+my\s+(?:home|office|work|new\s+address|place|flat|apartment|house)(?:\s+(?:at|in))?)?|` +
				`i\s+(?:now\s+)?live\s+at|i['’]ve\s+moved\s+to|i\s+(?:have\s+)?moved\s+to|` +
				`(?:change|update)\s+(?:my\s+|the\s+)?(?:delivery\s+|shipping\s+)?address\s+to|` +
				`mi\s+(?:nueva\s+)?dirección\s+(?:es|ahora\s+es)|(?:envíen(?:lo|la)?|envíalo|envíala|entréguen(?:lo|la)|mándalo|mándenlo)\s+a|cambi(?:a|e|en)\s+mi\s+dirección\s+a|vivo\s+en|` +
				`(?:mon|ma)\s+(?:nouvelle\s+)?adresse\s+est|(?:livrez|envoyez)(?:-le|-la|-les)?\s+(?:à|au)|j['’]habite\s+(?:au|à)|changez\s+mon\s+adresse\s+(?:pour|en)|` +
				`meine\s+(?:neue\s+)?adresse\s+(?:ist|lautet)|(?:liefern|schicken|senden)\s+sie\s+(?:es\s+|das\s+paket\s+|alles\s+)?(?:bitte\s+)?an|ich\s+wohne\s+(?:jetzt\s+)?(?:in\s+der|in|am)|` +
				`meu\s+(?:novo\s+)?endereço\s+é|(?:entregue|envie|mande)(?:-o|-a)?\s+(?:para|no|na)|moro\s+(?:na|no|em)|` +
				`il\s+mio\s+(?:nuovo\s+)?indirizzo\s+è|(?:consegnate|spedite|inviate)(?:lo|la)?\s+(?:a|al|in)|abito\s+(?:in|a))\s*:?\s*)` +
				`(?P<value>[\p{L}\p{N}][^\n]{4,200})`),
		},

		// Diet and allergies.
		{
			Key: "diet", Confidence: confDiet, Check: checkDiet, NotInQuestion: true,
			Pattern: regexp.MustCompile(`(?i:\b(?:i['’]m|i\s+am|i\s+eat(?:\s+only)?|i\s+only\s+eat|i\s+follow\s+a|i\s+keep|` +
				`soy|je\s+suis|ich\s+bin|ich\s+esse|sou|sono|mangio)\s+(?:(?:a|an|on\s+a|strictly|strict|fully|completely|only|pure|un|une|um|una)\s+){0,2})` +
				`(?P<value>(?i:vegetarian[oa]?|vegan[oa]?|végétarien(?:ne)?|végétalien(?:ne)?|végane|vegetarier(?:in)?|veganer(?:in)?|vegetarisch|` +
				`pesc[ae]tarian|gluten[- ]free|c(?:o|œ)?eliac|celíac[oa]|cœliaque|halal|kosher|jain|eggetarian|keto|lactose[- ]intolerant|lactose-free|dairy[- ]free))\b`),
		},
		{
			Key: "diet", Confidence: confDiet, Check: checkNoFood, NotInQuestion: true,
			Pattern: regexp.MustCompile(`(?i:\bi\s+(?:don['’]?t|do\s+not|never|can['’]?t|cannot)\s+eat\s+(?:any\s+)?)` +
				`(?P<value>(?i:pork|beef|meat|fish|seafood|eggs?|dairy|onions?|garlic|gluten|nuts|peanuts|chicken|shellfish|mushrooms))\b`),
		},
		{
			Key: "allergy", Confidence: confDiet, NotInQuestion: true, Check: checkAllergy,
			Pattern: regexp.MustCompile(`(?i:\b(?:i['’]m|i\s+am|soy|je\s+suis|ich\s+bin|sou|sono)\s+(?:severely\s+|very\s+)?(?:allergic\s+to|alérgic[oa]\s+(?:a(?:l)?|à)|allergique\s+(?:à|aux|au)|allergisch\s+gegen|allergic[oa]\s+(?:a(?:l|lle|i)?|agli))\s+(?:(?:los|las|el|la|les|the|die|den|i|gli|le|os|as)\s+)?)` +
				`(?P<value>\p{L}+(?:\s+(?:and|&|y|et|und|e)\s+\p{L}+)?)`),
		},
		{
			Key: "allergy", Confidence: confDiet, NotInQuestion: true,
			Pattern: regexp.MustCompile(`(?i:\bi\s+have\s+(?:a|an)\s+(?:severe\s+)?)(?P<value>\p{L}+)(?i:\s+allergy)`),
		},

		// How to be reached.
		{
			Key: "contact_channel", Confidence: confChannel, Check: checkChannel,
			Pattern: regexp.MustCompile(`(?i:\b(?:contact|reach|message|update|notify|ping)\s+me\s+(?:only\s+)?(?:by|via|on|through|over|using)\s+(?:my\s+)?|` +
				`\bi(?:\s+would|['’]d)?\s+prefer\s+(?:to\s+be\s+(?:contacted|reached)\s+(?:by|via|on|through)\s+)?|` +
				`\b(?:contáctame|contáctenme|contactarme|escríbanme)\s+(?:por|vía|via|en)\s+(?:el\s+)?|\bprefiero\s+(?:que\s+me\s+contacten\s+por\s+)?(?:el\s+)?|` +
				`\b(?:contactez-moi|contacte-moi|écrivez-moi)\s+(?:par|via|sur)\s+|\bje\s+préf[eè]re\s+(?:être\s+contacté(?:e)?\s+par\s+)?(?:les?\s+|l['’])?|` +
				`\b(?:kontaktieren|erreichen)\s+sie\s+mich\s+(?:bitte\s+)?(?:per|über|via|auf)\s+|\bich\s+bevorzuge\s+(?:den\s+|die\s+)?|` +
				`\b(?:entre\s+em\s+contato\s+comigo|me\s+contate|fale\s+comigo)\s+(?:por|via|pelo|pela)\s+|\bprefiro\s+(?:ser\s+contatad[oa]\s+(?:por|pelo|pela)\s+)?(?:o\s+)?|` +
				`\b(?:contattatemi|contattami|scrivetemi)\s+(?:via|per|su|tramite)\s+|\bpreferisco\s+(?:essere\s+contattat[oa]\s+(?:via|per|su|tramite)\s+)?(?:l['’]|il\s+)?)` + channel),
		},
		{
			Key: "contact_channel", Confidence: confChannel, Check: checkChannel,
			Pattern: regexp.MustCompile(`(?i:\b)` + channel + `(?i:\s+(?:is|works)\s+(?:the\s+)?best\s+(?:way\s+)?(?:to\s+reach\s+me|for\s+me)|\s+me\s+instead|\s+me\s+rather)`),
		},

		// Sizes.
		{
			Key: "size", Confidence: confSize, NotInQuestion: true,
			Pattern: regexp.MustCompile(`(?i:\b(?:my\s+(?:shoe\s+|shirt\s+|dress\s+|t-shirt\s+|jeans\s+|ring\s+)?size\s+is|i\s+(?:wear|take)\s+(?:a\s+)?size|i['’]m\s+a\s+size|i\s+am\s+a\s+size|` +
				`mi\s+talla\s+es(?:\s+la)?|uso\s+(?:la\s+)?talla|ma\s+taille\s+est|je\s+fais\s+du|je\s+porte\s+du|meine\s+(?:schuh)?größe\s+ist|ich\s+trage\s+(?:größe|gr\.)|` +
				`meu\s+tamanho\s+é|uso\s+tamanho|visto\s+tamanho|la\s+mia\s+taglia\s+è|porto\s+la\s+taglia)\s*)` +
				`(?P<value>(?:XXXS|XXS|XS|S|M|L|XL|XXL|XXXL|[2-5]XL|P|G|GG|(?:UK|US|EU)\s?\d{1,2}(?:[.,]5)?|\d{1,2}(?:[.,]5)?(?:\s?(?:UK|US|EU))?))\b`),
		},
		{
			Key: "size", Confidence: confSize, NotInQuestion: true,
			Pattern: regexp.MustCompile(`(?i:\bi\s+wear\s+(?:an?\s+)?)(?P<value>XXS|XS|S|M|L|XL|XXL|XXXL|[2-5]XL)\b`),
		},

		// Money, dates, flights, tickets.
		{
			Key: "amount", Confidence: confAmount, QuestionAboutSelf: true,
			Pattern: regexp.MustCompile(`(?:^|[^\p{L}\p{N}#-])(?P<value>` + currencyA + `(?:` + money + `)|(?:` + money + `)` + currencyB + `)(?:[^\p{L}\p{N}]|$)`),
		},
		{
			Key: "date", Confidence: confDate,
			Pattern: regexp.MustCompile(`(?i)(?:^|[^\p{L}\p{N}-])(?P<value>\d{4}-\d{2}-\d{2}|\d{1,2}[./]\d{1,2}[./]\d{4}|` +
				`\d{1,2}(?:st|nd|rd|th|er|º)?\.?\s+(?:of\s+|de\s+)?(?:` + monthNames + `|` + meses + `)(?:,?\s+(?:de\s+)?\d{4})?|` +
				monthNames + `\s+\d{1,2}(?:st|nd|rd|th)?(?:,?\s+\d{4})?)(?:[^\p{L}\p{N}]|$)`),
		},
		{
			Key: "flight", Confidence: confFlight, Check: checkFlight,
			Pattern: regexp.MustCompile(`(?i:\b(?:flight|vuelo|vol|flug|voo|volo)(?:\s+(?:number|no\.?|nr\.?|número|numéro|nummer))?(?:\s+(?:is|es|est|ist|é|è))?\s*[:#]?\s*)` +
				`(?P<value>[A-Z0-9]{2}\s?\d{1,4})\b`),
		},
		{
			Key: "ticket_id", Confidence: confTicket,
			Pattern: regexp.MustCompile(`(?i:\b(?:ticket(?:\s*(?:number|no\.?|num|nr\.?|id|#))?|(?:case|complaint|reference|ref\.?|incident|support\s+request)\s*(?:number|no\.?|num|nr\.?|id|#)|` +
				`(?:caso|dossier|chamado|protocolo|pratica|vorgang|ticketnummer|reclamación|réclamation)(?:\s+(?:number|no\.?|n[úu]mero|numéro|nummer|#))?)` +
				`(?:\s+(?:is|es|est|ist|é|è))?)\s*[:#]?\s*#?` + idValue(3)),
		},
	}
}
