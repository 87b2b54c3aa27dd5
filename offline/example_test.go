package offline_test

import (
	"context"
	"fmt"

	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/offline"
)

// The offline summary of the seed's conversation: the sentences with the
// name, the order ID, the delivery time, the question and the prices, each
// with who said it; "Sorry Kavya!" and "Ok." are dropped, and so are the
// openers "Hi,", "Also," and "Yes:".
func ExampleSummarizer() {
	s := offline.NewSummarizer(offline.Options{})
	summary, err := s.Summarize(context.Background(), "", seed.History())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(summary)
	// Output:
	// user: I'm Kavya. My order SE-10423 hasn't arrived.
	// assistant: It is out for delivery and should arrive by 8 pm.
	// user: Do you have running socks?
	// assistant: DryFit ankle socks (pack of 3) for Rs 249 and CushionRun for Rs 199.
	// user: Add the DryFit ones to my cart please.
}

// The default rules on the seed's conversation: facts come from the user's
// messages only (and Kavya asks for no language, so there is none).
func ExampleRules() {
	history := seed.History()
	for i := range history {
		history[i].Seq = int64(i + 1)
	}
	facts, err := offline.DefaultExtractor().Extract(context.Background(), history)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range facts {
		fmt.Printf("%d %s=%s (%.2f)\n", f.SourceSeq, f.Key, f.Value, f.Confidence)
	}
	// Output:
	// 1 name=Kavya (0.80)
	// 1 order_id=SE-10423 (0.85)
}

// DetectLanguage tells non-Latin languages by script and Latin ones by
// their common words.
func ExampleDetectLanguage() {
	for _, text := range []string{
		"Hola, mi pedido todavía no ha llegado.",
		"मेरा ऑर्डर अभी तक नहीं आया है",
		"Ok.",
	} {
		code, _, ok := offline.DetectLanguage(text)
		fmt.Printf("%q %v\n", code, ok)
	}
	// Output:
	// "es" true
	// "hi" true
	// "" false
}
