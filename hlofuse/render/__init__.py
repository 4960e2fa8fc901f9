"""Renderers of an explanation (hlofuse.explain.Explanation): rich tables for people
(`table`), explicit versioned JSON (`json`), a CSV of the boundaries (`csv`), Graphviz drawings
(`dot` builds the source, `svg` runs Graphviz), and one self-contained HTML report (`html`).
Each renderer only reads the explanation; none computes anything about fusion."""
