"""A file's bytes as plain text (issue 25): each supported kind from real small files, typed errors for the rest, and
hostile input bounded (pages, characters, inflated PDF streams, nesting, HTML that makes ``html.parser`` quadratic)."""

from __future__ import annotations

import json
import zlib

import pytest

from switchyard.platform.knowledge import (
    MAX_JSON_DEPTH,
    DocumentError,
    DocumentKind,
    DocumentTooLarge,
    MalformedDocument,
    ParseLimits,
    UndecodableDocument,
    UnsupportedDocumentType,
    document_kind,
    parse_document,
)


def _pdf(pages: list[str], *, compress: bool = False, padding: bytes = b"") -> bytes:
    """A minimal PDF of one Helvetica text line per page, written by hand with a correct cross-reference table.
    ``padding`` is appended to each page's content stream (as a PostScript comment) before compression."""
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, once the pages' numbers are known
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids = []
    for text in pages:
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1")
        content = b"BT /F1 12 Tf 72 720 Td (" + escaped + b") Tj ET\n" + (b"%" + padding + b"\n" if padding else b"")
        if compress:
            content = zlib.compress(content, 9)
            stream = b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content) + content + b"\nendstream"
        else:
            stream = b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream"
        objects.append(stream)
        content_ref = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            b"/Contents %d 0 R >>" % content_ref
        )
        kids.append(b"%d 0 R" % len(objects))
    objects[1] = b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % len(pages)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_a_pdf_becomes_the_text_of_its_pages_in_order() -> None:
    parsed = parse_document(
        _pdf(["Trainium2 has 96 GiB of HBM.", "The zircon heron protocol (v2)."]), filename="notes.pdf"
    )
    assert parsed.kind is DocumentKind.PDF
    first, second = parsed.text.split("\n\n")
    assert first.strip() == "Trainium2 has 96 GiB of HBM."
    assert second.strip() == "The zircon heron protocol (v2)."


def test_a_compressed_pdf_stream_is_read() -> None:
    parsed = parse_document(_pdf(["compressed page text"], compress=True), filename="c.pdf")
    assert parsed.text == "compressed page text"


def test_a_pdf_with_more_pages_than_the_limit_is_refused_before_reading_them() -> None:
    data = _pdf([f"page {n}" for n in range(6)])
    assert parse_document(data, filename="ok.pdf", limits=ParseLimits(max_pages=6)).text.count("page") == 6
    with pytest.raises(DocumentTooLarge, match="more than 5 pages"):
        parse_document(data, filename="big.pdf", limits=ParseLimits(max_pages=5))


def test_a_pdf_stream_inflating_past_the_limit_is_refused() -> None:
    """A zip-bomb-like page: 4 MB of content compressed to a few kilobytes."""
    bomb = _pdf(["hello"], compress=True, padding=b" " * 4_000_000)
    assert len(bomb) < 10_000
    with pytest.raises(DocumentTooLarge, match="parsing limit"):
        parse_document(bomb, filename="bomb.pdf", limits=ParseLimits(max_pdf_stream_bytes=1_000_000))
    assert parse_document(bomb, filename="bomb.pdf").text == "hello"  # under the default limit: read


def test_text_past_the_character_limit_is_refused_for_every_kind() -> None:
    limits = ParseLimits(max_chars=1_000)
    cases = {
        "a.txt": b"word " * 300,
        "a.pdf": _pdf(["word " * 100] * 5),
        "a.json": json.dumps([["x"] * 10] * 30).encode(),  # small on disk, long once indented
        "a.csv": b"a,b\n" * 400,
        "a.html": b"<p>word</p>" * 300,
    }
    for name, data in cases.items():
        with pytest.raises(DocumentTooLarge, match="more than 1000 characters"):
            parse_document(data, filename=name, limits=limits)


def test_broken_and_encrypted_pdfs_are_malformed_documents() -> None:
    with pytest.raises(MalformedDocument, match="not a readable PDF"):
        parse_document(b"%PDF-1.4\nthis is not a pdf at all", filename="broken.pdf")
    pypdf = pytest.importorskip("pypdf")
    writer = pypdf.PdfWriter()
    writer.add_blank_page(612, 792)
    writer.encrypt("secret", algorithm="RC4-128")
    import io

    sealed = io.BytesIO()
    writer.write(sealed)
    with pytest.raises(MalformedDocument, match="encrypted"):
        parse_document(sealed.getvalue(), filename="sealed.pdf")


def test_text_and_markdown_are_kept_as_written() -> None:
    markdown = "# Title\n\nSome *emphasis* and `code`.\n"
    assert parse_document(markdown.encode(), filename="README.md").text == markdown
    assert parse_document(markdown.encode(), filename="README.md").kind is DocumentKind.MARKDOWN
    assert parse_document("héllo\n".encode(), filename="a.txt").text == "héllo\n"
    assert parse_document(b"\xef\xbb\xbfwith a BOM", filename="a.txt").text == "with a BOM"
    assert parse_document("utf-16 text".encode("utf-16"), filename="a.txt").text == "utf-16 text"
    assert (
        parse_document("café".encode("latin-1"), filename="a", content_type="text/plain; charset=ISO-8859-1").text
        == "café"
    )
    assert parse_document(b"def f(): pass\n", filename="tool.py").kind is DocumentKind.TEXT


def test_undecodable_text_names_the_offset() -> None:
    with pytest.raises(UndecodableDocument, match=r"not valid utf-8 text: undecodable bytes at offset 6") as caught:
        parse_document(b"hello \xff\xfe world", filename="a.txt")
    assert caught.value.code == "invalid_file"
    with pytest.raises(UndecodableDocument, match="unknown text encoding 'klingon'"):
        parse_document(b"x", filename="a.txt", content_type="text/plain; charset=klingon")


def test_html_becomes_its_visible_text_with_blocks_on_their_own_lines() -> None:
    html = b"""<!doctype html><html><head><title>Fleet guide</title>
    <style>body { color: red }</style><script>var secret = "<p>not text</p>", open = "<!--", x = a<b;</script></head>
    <body><h1>Trainium&nbsp;fleets</h1><p>One <b>UltraServer</b> holds   64 chips.</p>
    <!-- a comment <p>hidden</p> --><ul><li>first</li><li>second &amp; last</li></ul>
    <template><p>template text</p></template><noscript>enable JavaScript</noscript>
    <p>if a &lt; b</p></body></html>"""
    text = parse_document(html, filename="guide.html").text
    assert text.splitlines() == [
        "Fleet guide",
        "Trainium fleets",  # runs of white space, non-breaking ones too, are one space
        "One UltraServer holds 64 chips.",
        "first",
        "second & last",
        "if a < b",
    ]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hostile", ["<a x", "<a/", "<a\n", "<!-- ", "</", "<?", "<a b='>", "<script><a x", "<style>"])
def test_hostile_html_is_parsed_in_linear_work(hostile: str) -> None:
    """Python's html.parser rescans an unfinished tag to the end of the input: 20,000 ``<a x`` took over a minute
    there. A megabyte of each such pattern must take well under a second (the timeout only catches a quadratic)."""
    data = (hostile * (1_000_000 // len(hostile)) + "<p>tail text</p>").encode()
    text = parse_document(data, filename="x.html").text
    assert len(text) <= len(data)


def test_a_deeply_nested_html_document_costs_no_recursion() -> None:
    html = b"<div>" * 100_000 + b"deep" + b"</div>" * 100_000
    assert parse_document(html, filename="deep.html").text == "deep"


def test_json_is_pretty_printed() -> None:
    data = json.dumps({"fleet": {"chips": 64, "name": "trn2u"}, "tags": ["a", "é"]}, separators=(",", ":")).encode()
    text = parse_document(data, filename="fleet.json").text
    assert text == json.dumps(
        {"fleet": {"chips": 64, "name": "trn2u"}, "tags": ["a", "é"]}, indent=2, ensure_ascii=False
    )
    lines = parse_document(b'{"a": 1}\n{"b": 2}\n', filename="rows.jsonl").text
    assert json.loads(lines) == [{"a": 1}, {"b": 2}]


def test_json_nesting_is_bounded() -> None:
    within = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert parse_document(within.encode(), filename="ok.json").text
    for depth in (MAX_JSON_DEPTH + 1, 100_000):  # the second is past the interpreter's recursion limit
        with pytest.raises(DocumentTooLarge, match=f"deeper than {MAX_JSON_DEPTH} levels"):
            parse_document(("[" * depth + "]" * depth).encode(), filename="deep.json")
    with pytest.raises(MalformedDocument, match="not valid JSON: Expecting"):
        parse_document(b'{"a": }', filename="bad.json")


def test_csv_rows_become_lines() -> None:
    data = b'name,chips,note\ntrn2,16,"fast, big"\n\ninf2,12,\n'
    assert parse_document(data, filename="fleet.csv").text == "name | chips | note\ntrn2 | 16 | fast, big\ninf2 | 12 |"
    with pytest.raises(MalformedDocument, match="not valid CSV"):
        parse_document(b'a,"' + b"x" * 200_000 + b'"\n', filename="huge-cell.csv")  # csv's field size limit


@pytest.mark.parametrize(
    ("filename", "content_type", "kind"),
    [
        ("a.pdf", None, DocumentKind.PDF),
        ("a.PDF", "application/octet-stream", DocumentKind.PDF),  # clients often send no real type
        ("upload", "application/pdf", DocumentKind.PDF),
        ("a.txt", "text/html; charset=utf-8", DocumentKind.HTML),  # a specific content type wins
        ("a.bin", "text/x-anything", DocumentKind.TEXT),
        ("data", "application/ld+json", DocumentKind.JSON),
        ("notes.markdown", None, DocumentKind.MARKDOWN),
        ("t.csv", None, DocumentKind.CSV),
    ],
)
def test_the_kind_comes_from_a_specific_content_type_else_the_extension(
    filename: str, content_type: str | None, kind: DocumentKind
) -> None:
    assert document_kind(filename, content_type) is kind


@pytest.mark.parametrize(
    ("filename", "content_type", "named"),
    [("photo.png", None, ".png"), ("a.docx", "application/octet-stream", ".docx"), ("x", "image/png", "image/png")],
)
def test_an_unsupported_type_is_a_typed_error_naming_it_and_the_supported_ones(
    filename: str, content_type: str | None, named: str
) -> None:
    with pytest.raises(UnsupportedDocumentType) as caught:
        parse_document(b"\x89PNG", filename=filename, content_type=content_type)
    assert caught.value.kind == named
    assert caught.value.code == "unsupported_file"
    assert f"unsupported file type {named!r}" in str(caught.value)
    for supported in (".pdf", ".md", ".html", ".json", ".csv", ".txt", "application/pdf"):
        assert supported in str(caught.value)
    assert isinstance(caught.value, DocumentError)
