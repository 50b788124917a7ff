"""The scripted shell's syntax: tree-sitter-bash's tree converted once per script text into
the slotted nodes of ``ast``, words lexed into their quoted parts, syntax errors worded as
bash words them. Nothing here runs a script."""
