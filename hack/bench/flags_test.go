package main

import (
	"flag"
	"io"
	"testing"
)

// Every command's flags register on one FlagSet, as run() does: `all`
// registers every part's, so two parts naming a flag alike panic there.
func TestEveryCommandsFlagsRegisterWithoutAClash(t *testing.T) {
	for name, register := range map[string]func(*flag.FlagSet){
		"webhook":   (&webhookConfig{}).flags,
		"scheduler": (&schedulerConfig{}).flags,
		"rss":       (&rssConfig{}).flags,
		"scale":     (&scaleConfig{}).flags,
		"all":       (&allConfig{}).flags,
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("registering the flags of %s: %v", name, r)
				}
			}()
			fs := flag.NewFlagSet(name, flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			register(fs)
		})
	}
}
