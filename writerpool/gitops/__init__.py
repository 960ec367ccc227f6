"""Everything git, host side: the operator's checkout through a clean git, writers'
clones through dulwich and plain reads only, bundles between them, ref-name rules."""
