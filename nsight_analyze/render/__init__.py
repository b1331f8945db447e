"""Every renderer: the library's results as terminal tables, JSON, CSV, Markdown and HTML.

    escape.py        the one place trace text is made safe (terminal, Markdown, HTML, <script>)
    palette.py       the one palette (figures, the report's JavaScript, the pages' CSS)
    units.py         values in human units by column name (terminal and Markdown cells)
    terminal.py      width-fitted tables and wrapped text
    markdown.py      GitHub-flavoured Markdown tables and text
    data.py          records and JSON (trace text kept exactly)
    output.py        `emit`: one result in the --format the user chose
    streams.py       stdout/stderr that a non-UTF-8 locale cannot make fail (ASCII fallbacks)
    table.py         `PlainTable`: rows without pandas, which every renderer takes too
    report/          the self-contained HTML report (`nsight-analyze report`)
    compare_html.py  the HTML diff of two runs (`nsight-analyze compare --html`)

Renderers only render what the library returns; nothing in the library imports them back
(except `data.records` / `units` for plain-data conversion and human units in messages).
Import the module you need (`from nsight_analyze.render.terminal import print_table`); this
package's own namespace is empty so that importing one renderer loads no other.
"""
