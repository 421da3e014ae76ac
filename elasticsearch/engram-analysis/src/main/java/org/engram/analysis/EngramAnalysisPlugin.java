package org.engram.analysis;

import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;
import java.util.regex.Pattern;

import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.email.UAX29URLEmailTokenizer;
import org.apache.lucene.analysis.en.EnglishMinimalStemFilter;
import org.apache.lucene.analysis.en.EnglishPossessiveFilter;
import org.apache.lucene.analysis.en.KStemFilter;
import org.apache.lucene.analysis.en.PorterStemFilter;
import org.apache.lucene.analysis.miscellaneous.ASCIIFoldingFilter;
import org.apache.lucene.analysis.pattern.PatternCaptureGroupTokenFilter;
import org.apache.lucene.analysis.snowball.SnowballFilter;
import org.apache.lucene.analysis.standard.StandardAnalyzer;
import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.env.Environment;
import org.elasticsearch.index.IndexSettings;
import org.elasticsearch.index.analysis.NormalizingTokenFilterFactory;
import org.elasticsearch.index.analysis.TokenFilterFactory;
import org.elasticsearch.index.analysis.TokenizerFactory;
import org.elasticsearch.indices.analysis.AnalysisModule.AnalysisProvider;
import org.elasticsearch.plugins.AnalysisPlugin;
import org.elasticsearch.plugins.Plugin;
import org.tartarus.snowball.ext.EnglishStemmer;

/**
 * Registers the subset of Elasticsearch's analysis-common components that the
 * {@code .security} system index and Engram's English analysis need, under
 * the same names and settings as analysis-common, so that an integ-test-zip
 * distribution (which ships without that module) can run with security on.
 */
public class EngramAnalysisPlugin extends Plugin implements AnalysisPlugin {

    @Override
    public Map<String, AnalysisProvider<TokenFilterFactory>> getTokenFilters() {
        return Map.of(
            "pattern_capture", AnalysisPlugin.requiresAnalysisSettings(EngramAnalysisPlugin::patternCapture),
            "unique", (indexSettings, env, name, settings) -> {
                boolean samePosition = settings.getAsBoolean("only_on_same_position", false);
                return filter(name, in -> new UniqueTokenFilter(in, samePosition));
            },
            "porter_stem", (indexSettings, env, name, settings) -> filter(name, PorterStemFilter::new),
            "kstem", (indexSettings, env, name, settings) -> filter(name, KStemFilter::new),
            "asciifolding", (indexSettings, env, name, settings) -> asciiFolding(name, settings),
            "stemmer", (indexSettings, env, name, settings) -> stemmer(name, settings)
        );
    }

    @Override
    public Map<String, AnalysisProvider<TokenizerFactory>> getTokenizers() {
        return Map.of("uax_url_email", (indexSettings, env, name, settings) -> {
            int maxTokenLength = settings.getAsInt("max_token_length", StandardAnalyzer.DEFAULT_MAX_TOKEN_LENGTH);
            return TokenizerFactory.newFactory(name, () -> {
                UAX29URLEmailTokenizer tokenizer = new UAX29URLEmailTokenizer();
                tokenizer.setMaxTokenLength(maxTokenLength);
                return tokenizer;
            });
        });
    }

    private static TokenFilterFactory patternCapture(IndexSettings indexSettings, Environment env, String name, Settings settings) {
        List<String> regexes = settings.getAsList("patterns", null);
        if (regexes == null) {
            throw new IllegalArgumentException("required setting 'patterns' is missing for token filter [" + name + "]");
        }
        Pattern[] patterns = regexes.stream().map(Pattern::compile).toArray(Pattern[]::new);
        boolean preserveOriginal = settings.getAsBoolean("preserve_original", true);
        return filter(name, in -> new PatternCaptureGroupTokenFilter(in, preserveOriginal, patterns));
    }

    private static TokenFilterFactory asciiFolding(String name, Settings settings) {
        boolean preserveOriginal = settings.getAsBoolean("preserve_original", false);
        return new NormalizingTokenFilterFactory() {
            @Override
            public String name() {
                return name;
            }

            @Override
            public TokenStream create(TokenStream in) {
                return new ASCIIFoldingFilter(in, preserveOriginal);
            }

            @Override
            public TokenStream normalize(TokenStream in) {
                // Normalizers must emit exactly one token per input token.
                return new ASCIIFoldingFilter(in, false);
            }
        };
    }

    private static TokenFilterFactory stemmer(String name, Settings settings) {
        String language = settings.get("language", settings.get("name", "english")).toLowerCase(Locale.ROOT);
        Function<TokenStream, TokenStream> stem = switch (language) {
            case "english", "porter" -> PorterStemFilter::new;
            case "porter2" -> in -> new SnowballFilter(in, new EnglishStemmer());
            case "light_english", "kstem" -> KStemFilter::new;
            case "minimal_english" -> EnglishMinimalStemFilter::new;
            case "possessive_english" -> EnglishPossessiveFilter::new;
            default -> throw new IllegalArgumentException(
                "stemmer language [" + language + "] is not supported by engram-analysis for token filter [" + name + "]"
            );
        };
        return filter(name, stem);
    }

    private static TokenFilterFactory filter(String name, Function<TokenStream, TokenStream> create) {
        return new TokenFilterFactory() {
            @Override
            public String name() {
                return name;
            }

            @Override
            public TokenStream create(TokenStream in) {
                return create.apply(in);
            }
        };
    }
}
