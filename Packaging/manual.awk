# Makes a manual page from swift-argument-parser's generate-manual read as Debian's tools want
# (lintian, lexgrog, groff), without changing what it says:
#   awk -v name="handoff account create" -f Packaging/manual.awk handoff.account.create.1
# - its name in NAME has no spaces (handoff-account-create, as git names its pages), so that
#   whatis and apropos find it; the synopsis still shows the command as typed;
# - titles and cross-references use the same dashed names as the files;
# - a blank line between paragraphs becomes .Pp;
# - the examples after "Examples:" are a literal block, kept as written.
function dashed(s) { gsub(/\./, "-", s); gsub(/ /, "-", s); return s }
BEGIN { section = ""; literal = 0; paragraph = 0 }
/^\.Sh / {
    if (literal) { print ".Ed"; literal = 0 }
    section = $2
}
/^\.Dt / { $2 = dashed($2); print; next }
/^\.Xr / { $2 = dashed($2); print; next }
section == "NAME" && /^\.Nm / { print ".Nm " dashed(name); next }
$0 == ".Nm" { print ".Nm \"" name "\""; next }
$0 == "Examples:" {
    if (!paragraph) print ".Pp"
    print "Examples:"
    print ".Bd -literal -offset indent"
    literal = 1; paragraph = 0
    next
}
literal && /^\./ { print ".Ed"; literal = 0 }
literal { sub(/^  /, ""); print; next }
$0 == "" { if (!paragraph) print ".Pp"; paragraph = 1; next }
{ paragraph = 0; print }
END { if (literal) print ".Ed" }
