"""A file's bytes as plain text, ready to chunk: text, Markdown, HTML, JSON, CSV and PDF.

``parse_document(data, filename=..., content_type=...)`` picks the kind from the content type when it names one
(``text/html; charset=...``) and from the file name's extension otherwise (clients often send
``application/octet-stream``), then extracts text:

- text and source code: decoded (UTF-8, a byte-order mark honoured, or the content type's ``charset``); bytes
  that do not decode are an ``UndecodableDocument`` naming where;
- Markdown: kept as written (its markup is text a reader and a search both use);
- HTML: the text content, with ``script``, ``style``, ``template`` and ``noscript`` dropped and block elements on
  lines of their own (the standard library's ``html.parser``, fed a copy in which every ``<`` that cannot open a
  complete tag is escaped and scripts and styles pass whole: that parser rescans an unfinished tag to the end of
  the input, quadratic on ``<a<a<a...``; open elements are counted, never recursed into);
- JSON: the document pretty-printed (two-space indent), nested ``MAX_JSON_DEPTH`` levels at most; JSON Lines
  (one document a line) as the list of its documents;
- CSV: one line per row, cells joined by `` | ``;
- PDF: each page's extracted text (``pypdf``), pages separated by a blank line.

Hostile input is bounded: the caller limits the upload's size; here no kind yields more than
``ParseLimits.max_chars`` characters of text nor reads more than ``ParseLimits.max_pages`` pages
(``DocumentTooLarge``), and a PDF stream inflates to ``ParseLimits.max_pdf_stream_bytes`` at most (pypdf's own
limits, tightened; its other limits, on content-stream parsing work and page trees, stay on). Parsing is CPU
work (a large PDF takes seconds: up to ``max_pages`` streams of that size): run it on a worker with a time
limit or in a thread, never on an event loop serving tenants.
Every failure is a ``DocumentError`` whose ``code`` is OpenAI's ``last_error`` code (``unsupported_file`` or
``invalid_file``).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from html.parser import HTMLParser
from pathlib import PurePosixPath
from typing import Any

__all__ = [
    "MAX_JSON_DEPTH",
    "SUPPORTED_TYPES",
    "DocumentError",
    "DocumentKind",
    "DocumentTooLarge",
    "MalformedDocument",
    "ParseLimits",
    "ParsedDocument",
    "UndecodableDocument",
    "UnsupportedDocumentType",
    "document_kind",
    "parse_document",
]

MAX_JSON_DEPTH = 64


class DocumentKind(StrEnum):
    """How a file's bytes become text."""

    TEXT = "text"
    MARKDOWN = "markdown"
    HTML = "html"
    JSON = "json"
    CSV = "csv"
    PDF = "pdf"


_TEXT_EXTENSIONS = (  # noqa: SIM905 (a long list literal reads worse)
    ".txt .text .log .rst .tex .c .cc .cpp .h .hpp .cs .css .go .java .js .mjs .ts .tsx .jsx .php .py .rb .rs .sh "
    ".sql .swift .kt .scala .yaml .yml .toml .ini .xml"
).split()
_EXTENSIONS: dict[str, DocumentKind] = {
    **dict.fromkeys(_TEXT_EXTENSIONS, DocumentKind.TEXT),
    **dict.fromkeys((".md", ".markdown", ".mdx"), DocumentKind.MARKDOWN),
    **dict.fromkeys((".html", ".htm", ".xhtml"), DocumentKind.HTML),
    **dict.fromkeys((".json", ".jsonl"), DocumentKind.JSON),
    ".csv": DocumentKind.CSV,
    ".pdf": DocumentKind.PDF,
}
_CONTENT_TYPES: dict[str, DocumentKind] = {
    "text/plain": DocumentKind.TEXT,
    "text/markdown": DocumentKind.MARKDOWN,
    "text/x-markdown": DocumentKind.MARKDOWN,
    "text/html": DocumentKind.HTML,
    "application/xhtml+xml": DocumentKind.HTML,
    "application/json": DocumentKind.JSON,
    "text/json": DocumentKind.JSON,
    "text/csv": DocumentKind.CSV,
    "application/pdf": DocumentKind.PDF,
}
_GENERIC_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream", "application/unknown"})
SUPPORTED_TYPES = tuple(sorted(_EXTENSIONS)) + tuple(sorted(_CONTENT_TYPES))
"""What ``parse_document`` reads: file name extensions, then content types."""


class DocumentError(ValueError):
    """A file that cannot become text; ``code`` is what a vector store file's ``last_error.code`` says."""

    code = "invalid_file"


class UnsupportedDocumentType(DocumentError):
    """Neither the content type nor the file name names a kind this parser reads."""

    code = "unsupported_file"

    def __init__(self, kind: str) -> None:
        self.kind = kind
        super().__init__(f"unsupported file type {kind!r}; supported: {', '.join(SUPPORTED_TYPES)}")


class UndecodableDocument(DocumentError):
    """Text whose bytes are not in its encoding."""


class MalformedDocument(DocumentError):
    """Bytes that do not hold a document of their kind (broken JSON, CSV or PDF, an encrypted PDF)."""


class DocumentTooLarge(DocumentError):
    """A document past a ``ParseLimits`` bound (pages, characters of text, nesting, a stream's inflated size)."""


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """What one document may cost to parse (the upload's byte size is the caller's limit)."""

    max_chars: int = 20_000_000  # of extracted text: about 5M tokens
    max_pages: int = 2_000  # of a PDF, refused before any page is read
    max_pdf_stream_bytes: int = 16_000_000  # one PDF stream, inflated (pypdf's default is 75 MB)


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """A file's text and the kind it was read as."""

    kind: DocumentKind
    text: str


def document_kind(filename: str, content_type: str | None = None) -> DocumentKind:
    """The kind to read a file as: its content type's, unless generic or unknown, else its extension's."""
    media_type = (content_type or "").split(";")[0].strip().lower()
    if media_type in _CONTENT_TYPES:
        return _CONTENT_TYPES[media_type]
    if media_type.endswith("+json"):
        return DocumentKind.JSON
    extension = PurePosixPath(filename.replace("\\", "/")).suffix.lower()
    if extension in _EXTENSIONS:
        return _EXTENSIONS[extension]
    if media_type.startswith("text/"):
        return DocumentKind.TEXT
    raise UnsupportedDocumentType(media_type if media_type not in _GENERIC_TYPES else extension or filename)


def parse_document(
    data: bytes, *, filename: str, content_type: str | None = None, limits: ParseLimits | None = None
) -> ParsedDocument:
    """``data`` as plain text (module docstring), or a ``DocumentError``."""
    limits = limits or ParseLimits()
    kind = document_kind(filename, content_type)
    text = _pdf_text(data, limits) if kind is DocumentKind.PDF else _PARSERS[kind](_decode(data, content_type), limits)
    if len(text) > limits.max_chars:
        raise DocumentTooLarge(f"the document holds more than {limits.max_chars} characters of text")
    return ParsedDocument(kind=kind, text=text)


def _decode(data: bytes, content_type: str | None) -> str:
    encoding = "utf-8"
    for parameter in (content_type or "").split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            encoding = value.strip().strip('"').lower()
    if data.startswith(codecs.BOM_UTF8):
        encoding = "utf-8-sig"
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    try:
        return data.decode(encoding)
    except LookupError:
        raise UndecodableDocument(f"unknown text encoding {encoding!r}") from None
    except UnicodeDecodeError as error:
        raise UndecodableDocument(
            f"the file is not valid {error.encoding} text: undecodable bytes at offset {error.start}"
        ) from None


def _text(text: str, limits: ParseLimits) -> str:
    return text


class _TextContent(HTMLParser):
    """Collects an HTML document's text: hidden elements dropped, block elements on their own lines."""

    HIDDEN = frozenset({"script", "style", "template", "noscript"})
    BLOCKS = frozenset(
        (  # noqa: SIM905
            "address article aside blockquote br dd div dl dt fieldset figcaption figure footer form h1 h2 h3 h4 "
            "h5 h6 header hr li main nav ol p pre section table tbody td th thead tr ul title"
        ).split()
    )

    def __init__(self, max_chars: int) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.chars = 0
        self.max_chars = max_chars
        self.hidden = 0  # depth inside hidden elements (a counter: nesting costs nothing)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.HIDDEN:
            self.hidden += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.hidden:
            return
        self.parts.append(data)
        self.chars += len(data)
        if self.chars > self.max_chars:
            raise DocumentTooLarge(f"the document holds more than {self.max_chars} characters of text")


_RAW_TEXT_START = re.compile(r"<(script|style)[\s/>]", re.IGNORECASE)  # html.parser's CDATA_CONTENT_ELEMENTS


def _closable_tags(html: str) -> str:
    """``html`` with every ``<`` that does not open a complete tag (a ``>`` before the next ``<``) or a closed
    comment escaped, in one pass: what keeps ``html.parser`` linear."""
    out: list[str] = []
    position = 0
    next_close = -1
    while (start := html.find("<", position)) >= 0:
        out.append(html[position:start])
        if html.startswith("<!--", start):
            end = html.find("-->", start + 4)
            if end < 0:  # an unclosed comment hides the rest, as browsers do
                return "".join(out)
            out.append(html[start : end + 3])
            position = end + 3
            continue
        if next_close <= start:
            next_close = html.find(">", start + 1)
            if next_close < 0:
                next_close = len(html)
        following = html.find("<", start + 1, next_close)
        if next_close < len(html) and following < 0:
            out.append(html[start : next_close + 1])
            position = next_close + 1
            raw = _RAW_TEXT_START.match(html, start)
            if raw:  # a script or a style is the parser's to skip whole, whatever its text holds
                end_tag = re.compile(rf"</{raw[1]}", re.IGNORECASE).search(html, position)
                stop = end_tag.start() if end_tag else len(html)
                out.append(html[position:stop])
                position = stop
        else:
            out.append("&lt;")
            position = start + 1
    out.append(html[position:])
    return "".join(out)


def _html(html: str, limits: ParseLimits) -> str:
    parser = _TextContent(limits.max_chars)
    parser.feed(_closable_tags(html))
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def _depth_within(document: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                return False
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return True


def _json(text: str, limits: ParseLimits) -> str:
    try:
        document = json.loads(text)
    except RecursionError:
        raise DocumentTooLarge(f"the JSON document is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except json.JSONDecodeError as error:
        try:  # JSON Lines: one document a line
            document = [json.loads(line) for line in text.splitlines() if line.strip()]
        except (json.JSONDecodeError, RecursionError):
            raise MalformedDocument(
                f"not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
            ) from None
    if not _depth_within(document, MAX_JSON_DEPTH):
        raise DocumentTooLarge(f"the JSON document is nested deeper than {MAX_JSON_DEPTH} levels")
    return "".join(_capped(json.JSONEncoder(indent=2, ensure_ascii=False).iterencode(document), limits))


def _capped(pieces: Iterator[str], limits: ParseLimits) -> Iterator[str]:
    """The pieces, until they pass ``limits.max_chars`` (indentation can make text much longer than its file)."""
    total = 0
    for piece in pieces:
        total += len(piece)
        if total > limits.max_chars:
            raise DocumentTooLarge(f"the document holds more than {limits.max_chars} characters of text")
        yield piece


def _csv(text: str, limits: ParseLimits) -> str:
    rows = csv.reader(io.StringIO(text, newline=""))
    try:
        lines = (
            " | ".join(cell.strip() for cell in row).rstrip() + "\n"
            for row in rows
            if any(cell.strip() for cell in row)
        )
        return "".join(_capped(lines, limits)).rstrip("\n")
    except csv.Error as error:
        raise MalformedDocument(f"not valid CSV: {error} (line {rows.line_num})") from None


_PARSERS: dict[DocumentKind, Callable[[str, ParseLimits], str]] = {
    DocumentKind.TEXT: _text,
    DocumentKind.MARKDOWN: _text,
    DocumentKind.HTML: _html,
    DocumentKind.JSON: _json,
    DocumentKind.CSV: _csv,
}


def _pdf_text(data: bytes, limits: ParseLimits) -> str:
    import pypdf  # imported when a PDF comes: the rest of the platform never pays for it
    from pypdf.errors import LimitReachedError, PyPdfError

    cap = limits.max_pdf_stream_bytes
    try:
        with pypdf.apply_configuration(
            maximum_declared_stream_length=cap,
            array_based_stream_maximum_output_length=cap,
            zlib_maximum_output_length=cap,
            lzw_maximum_output_length=cap,
            run_length_maximum_output_length=cap,
            brotli_maximum_output_length=cap,
        ):
            reader = pypdf.PdfReader(io.BytesIO(data))
            if reader.is_encrypted:
                raise MalformedDocument("the PDF is encrypted")
            if len(reader.pages) > limits.max_pages:
                raise DocumentTooLarge(f"the PDF has more than {limits.max_pages} pages")
            pages = (page.extract_text() + "\n\n" for page in reader.pages)
            return "".join(_capped(pages, limits)).strip()
    except DocumentError:
        raise
    except LimitReachedError as error:
        raise DocumentTooLarge(f"the PDF is past a parsing limit: {error}") from None
    except (PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError) as error:
        raise MalformedDocument(f"not a readable PDF: {error}") from None
