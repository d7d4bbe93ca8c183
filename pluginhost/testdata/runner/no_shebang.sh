echo this file has no shebang line
