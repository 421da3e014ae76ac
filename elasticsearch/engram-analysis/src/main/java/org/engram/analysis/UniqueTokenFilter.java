package org.engram.analysis;

import java.io.IOException;

import org.apache.lucene.analysis.CharArraySet;
import org.apache.lucene.analysis.TokenFilter;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.apache.lucene.analysis.tokenattributes.PositionIncrementAttribute;

/**
 * Drops tokens whose term has already been emitted, mirroring Elasticsearch's
 * {@code unique} filter: across the whole stream, or, with
 * {@code onlyOnSamePosition}, only among tokens at the same position.
 */
final class UniqueTokenFilter extends TokenFilter {
    private final CharTermAttribute termAttr = addAttribute(CharTermAttribute.class);
    private final PositionIncrementAttribute posIncAttr = addAttribute(PositionIncrementAttribute.class);
    private final CharArraySet seen = new CharArraySet(8, false);
    private final boolean onlyOnSamePosition;

    UniqueTokenFilter(TokenStream in, boolean onlyOnSamePosition) {
        super(in);
        this.onlyOnSamePosition = onlyOnSamePosition;
    }

    @Override
    public boolean incrementToken() throws IOException {
        while (input.incrementToken()) {
            if (onlyOnSamePosition && posIncAttr.getPositionIncrement() > 0) {
                seen.clear();
            }
            char[] term = termAttr.buffer();
            int length = termAttr.length();
            if (seen.contains(term, 0, length) == false) {
                char[] copy = new char[length];
                System.arraycopy(term, 0, copy, 0, length);
                seen.add(copy);
                return true;
            }
        }
        return false;
    }

    @Override
    public void reset() throws IOException {
        super.reset();
        seen.clear();
    }
}
