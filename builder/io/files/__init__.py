"""The `files` source: PDF, HTML, Markdown, Word and text files turned into documents.

`convert` reads one file into located pieces (pages, sections under headings, paragraphs),
`text` cleans each piece and joins them into the published text with a map from character
ranges back to where each piece came from, `cache` keeps a conversion under the digest of
the file's bytes, `dedup` finds near-duplicate documents, `read` walks a folder into source
rows and counted drops, and `locate` names the page or heading a span of the text sits in.
The converters come with the optional `files` extra.
"""
