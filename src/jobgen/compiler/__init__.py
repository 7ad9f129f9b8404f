"""The compile pipeline: manifest.yaml -> load -> validate -> plan -> render -> write.

Imports point downward through the stages; nothing here prints or exits (jobgen/cli does),
and only write.py touches an output tree.
"""
