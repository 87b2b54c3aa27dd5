// Package offline provides a summarizer and fact extractors that need no
// model, so that chatmem keeps a conversation's key facts with no API key.
// Everything here is deterministic (the same input gives the same output),
// uses only the standard library, and treats the transcript as data: text
// that looks like an instruction is summarized or matched like any other.
//
// [Summarizer] writes an extractive rolling summary. It keeps the sentences
// that carry IDs (SE-10423, order #12345), emails, phone numbers, names
// (capitalized words inside a sentence, and words like "DryFit"), amounts
// (Rs 249, $12.50), dates and times (8 pm, Monday, 12 May 2024),
// commitments and open questions ("I will", "should arrive", "please", a
// question), and plain statements of fact, one line per message, prefixed
// with who said it:
//
//	user: I'm Kavya. My order SE-10423 hasn't arrived.
//	assistant: It is out for delivery and should arrive by 8 pm.
//
// Under its cap it chooses by coverage: the sentence that adds the most not
// yet kept (an ID or contact above a name, a name above a number or a date,
// those above a plain word; a speaker's own news above a remark about the
// other) per character goes next, so that a repeated fact is kept once and
// the room goes to facts from every part of the conversation. A question
// is kept only with the other speaker's answer after it, but for the open
// request: a small summary (under about 150 tokens, as summary_buffer
// makes at budgets under about 270) keeps first what the user's last
// message asks, the thread the recent messages carry on (unless a reply
// reports it done), and ends with it alone if its answer does not fit too. At a budget of 40 the seed's
// summary is
//
//	user: I'm Kavya.
//	user: Do you have running socks?
//
// rather than its first message alone. A transcript whose
// messages open with a date stamp ("[1:56 pm on 8 May, 2023]") gets date
// headings ("[8 May 2023]") and its relative dates resolved ("yesterday (7
// May 2023)"). Pleasantries and chit-chat ("Sorry Kavya!", "No worries,
// Mel!"), opening fillers ("Hi,", "Ok.") and hollow words ("really",
// "kinda") are dropped, and long statements are cut at dashes and
// semicolons into clauses kept on their own. The previous summary's lines
// (and headings) are candidates again, scored the same way, so the summary
// rolls without eroding what it kept unless newer facts tell more.
//
// [Rules] is an extractor of named regular expressions applied to user
// messages only; [DefaultRules] finds name, order_id, ticket_id, email,
// phone, the language asked for, address, diet, allergy, contact_channel,
// size, amount, date and flight, and drops what a clause negates, gives to
// someone else or marks as past. [DetectLanguage] tells the language a
// message is written in (RulesOptions.Language stores it as
// written_language).
//
// Limits: the summary copies sentences, it does not paraphrase, so it is
// only as short as the conversation's chit-chat is long; it weighs words,
// not meaning, so it cannot tell which of two sentences that add as much
// matters more, nor resolve "it" or "that one"; the chit-chat, hollow-word
// and function-word lists and the relative dates it resolves are English. Names are found by capitalization, so lowercase names ("i'm
// kavya") and names in scripts without case (Devanagari, Han) are missed,
// and a capitalized word that is not a name ("I'm Canadian", not in the
// stopword list) can be taken for one. Order IDs are found only after the
// word "order" (or pedido, commande, Bestellung, encomenda, ordine). The
// language detector knows English, Spanish, French, German, Portuguese and
// Italian by their common words and other languages only by script
// (Devanagari is taken as Hindi, Cyrillic as Russian or Ukrainian, Arabic
// script as Arabic, Persian or Urdu); it stays silent on short or mixed
// text. Sentences are split by punctuation with a short abbreviation list,
// so unusual abbreviations can split a sentence in two.
package offline
