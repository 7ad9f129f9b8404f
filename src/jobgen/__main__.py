from jobgen.cli import main

main()
